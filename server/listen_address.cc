#include "server/listen_address.h"

#include <arpa/inet.h>

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace mulo::server {

absl::StatusOr<sockaddr_in> ParseListenAddress(absl::string_view address, absl::string_view what) {
  const auto invalid = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " \"", address, "\": expected PORT or IPV4:PORT with PORT in 0..65535, e.g. "
        "0.0.0.0:9090"));
  };
  const size_t colon = address.rfind(':');
  const absl::string_view port =
      colon == absl::string_view::npos ? address : address.substr(colon + 1);
  int value = 0;
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(),
                   [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) ||
      !absl::SimpleAtoi(port, &value) || value > 65535) {
    return invalid();
  }
  sockaddr_in socket_address{};
  socket_address.sin_family = AF_INET;
  socket_address.sin_port = htons(static_cast<uint16_t>(value));
  socket_address.sin_addr.s_addr = htonl(INADDR_ANY);
  if (colon != absl::string_view::npos) {
    const std::string host(address.substr(0, colon));
    if (inet_pton(AF_INET, host.c_str(), &socket_address.sin_addr) != 1) return invalid();
  }
  return socket_address;
}

}  // namespace mulo::server
