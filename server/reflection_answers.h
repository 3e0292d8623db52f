// What server reflection answers to one request, from a descriptor pool and the server's
// service names: the same answers as gRPC's own v1alpha implementation (the same pool, the
// same files in the same order; tests/server/hostile_requests_test compares the two), with
// error messages that name the field and quote what was asked for. No transport here: the
// stream that reads requests and writes these answers is server/reflection_v1_service.h.
#ifndef MULO_SERVER_REFLECTION_ANSWERS_H_
#define MULO_SERVER_REFLECTION_ANSWERS_H_

#include <google/protobuf/descriptor.h>

#include <string>
#include <vector>

#include "grpc/reflection/v1/reflection.pb.h"

namespace mulo::server {

// `services`: fully qualified names, listed in this order by list_services. Every request is
// answered (an unknown symbol or an empty request gets an error_response), echoing `host` and
// the request as the protocol asks.
grpc::reflection::v1::ServerReflectionResponse AnswerReflectionRequest(
    const grpc::reflection::v1::ServerReflectionRequest& request,
    const std::vector<std::string>& services, const google::protobuf::DescriptorPool& pool);

}  // namespace mulo::server

#endif  // MULO_SERVER_REFLECTION_ANSWERS_H_
