// "PORT" or "IPV4:PORT" (port 0..65535) as a socket address, for the HTTP listeners (metrics,
// OpenAI API). Lists, host names and IPv6 are refused so that a listener's port() always names
// the one socket it listens on.
#ifndef MULO_SERVER_LISTEN_ADDRESS_H_
#define MULO_SERVER_LISTEN_ADDRESS_H_

#include <netinet/in.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mulo::server {

// `what` names the listener in errors ("metrics HTTP address").
absl::StatusOr<sockaddr_in> ParseListenAddress(absl::string_view address, absl::string_view what);

}  // namespace mulo::server

#endif  // MULO_SERVER_LISTEN_ADDRESS_H_
