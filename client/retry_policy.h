// The gRPC service config that makes a channel retry mulo calls the server answers with
// UNAVAILABLE: a replica draining on SIGTERM ("server is draining"), one restarting, or a
// connection refused while a balancer still lists it. And CANCELLED: at the last instant of
// a drain, gRPC's server core cancels calls it had received but not yet handed to the service
// (seen about once in five rolling restarts behind nginx). A call the application itself
// cancels is never retried, so this only ever repeats calls the server dropped. gRPC retries
// a call only while no response message has arrived, so a retried Generate never streams a
// row twice.
#ifndef MULO_CLIENT_RETRY_POLICY_H_
#define MULO_CLIENT_RETRY_POLICY_H_

#include <string>

namespace mulo::client {

// JSON for grpc::ChannelArguments::SetServiceConfigJSON: up to `max_attempts` tries
// (clamped to gRPC's limit of 2..5) of every mulo.v1.ImageGeneration method, backing off
// 0.1 s, 0.2 s, 0.4 s ... (at most 2 s, with gRPC's jitter) between them.
std::string RetryServiceConfig(int max_attempts);

}  // namespace mulo::client

#endif  // MULO_CLIENT_RETRY_POLICY_H_
