// HTTP framing, methods, CORS, request ids and keys as RFC 9110 / 9112 and browsers expect
// (issue 59, part 4), each case sent as raw bytes to a real mulo_server:
//   - two Content-Lengths that differ, or Content-Length with Transfer-Encoding: 400 and the
//     connection closed, so that nothing after the first body runs as a second request;
//   - a transfer coding other than chunked: 501 and closed; chunked alone is read;
//   - 405 names the methods in Allow; OPTIONS is a CORS preflight only when origins are set;
//   - an unknown path is not_found, an unknown model model_not_found;
//   - X-Request-Id comes back on every answer, streamed or not;
//   - the Bearer scheme in any case; a keys file emptied and reloaded revokes every key.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tests/server/grpc_calls.h"
#include "tests/server/metrics/http_client.h"
#include "tests/server/server_process.h"

namespace mulo::testing {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;
using server::metrics::testing::ConnectLoopback;

// What came back for raw request bytes: every response's status, headers (lower-cased names)
// and body, in order, and whether the server closed the connection.
struct Raw {
  struct Response {
    int status = 0;
    std::map<std::string, std::string> headers;
    std::string body;
  };
  std::vector<Response> responses;
  bool closed = false;
};

// Sends `bytes` and reads for up to `seconds` or until the server closes; parses every
// response (Content-Length bodies; chunked ones are read to the terminating chunk).
Raw Send(int port, const std::string& bytes, double seconds = 3.0) {
  Raw raw;
  const int fd = ConnectLoopback(port, 5);
  if (fd < 0) return raw;
  send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  std::string in;
  const auto start = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buffer[65536];
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) {
      raw.closed = true;
      break;
    }
    in.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  size_t at = 0;
  while (at < in.size()) {
    const size_t end = in.find("\r\n\r\n", at);
    if (end == std::string::npos) break;
    Raw::Response r;
    std::vector<std::string> lines = absl::StrSplit(in.substr(at, end - at), "\r\n");
    std::vector<std::string> status = absl::StrSplit(lines[0], ' ');
    if (status.size() < 2 || !absl::SimpleAtoi(status[1], &r.status)) break;
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t colon = lines[i].find(':');
      if (colon == std::string::npos) continue;
      r.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
          std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    }
    at = end + 4;
    size_t length = 0;
    if (r.headers.count("content-length") &&
        absl::SimpleAtoi(r.headers["content-length"], &length)) {
      r.body = in.substr(at, length);
      at += length;
    } else if (r.headers["transfer-encoding"] == "chunked") {
      while (at < in.size()) {
        const size_t line_end = in.find("\r\n", at);
        if (line_end == std::string::npos) break;
        size_t chunk = 0;
        if (!absl::SimpleHexAtoi(in.substr(at, line_end - at), &chunk)) break;
        at = line_end + 2;
        if (chunk == 0) {
          at += 2;
          break;
        }
        r.body += in.substr(at, chunk);
        at += chunk + 2;
      }
    } else {
      r.body = in.substr(at);
      at = in.size();
    }
    raw.responses.push_back(std::move(r));
  }
  return raw;
}

std::string ErrorCode(const Raw::Response& r) {
  const Json json = Json::parse(r.body, nullptr, false);
  if (json.is_discarded() || !json.contains("error")) return "";
  return json["error"].value("code", "");
}

const std::string kModels = "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";

TEST(HttpFramingTest, AmbiguousBodiesAreRefusedAndTheConnectionClosed) {
  auto server = ServerProcess::Start(kRepository);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->http_port();
  // Two Content-Lengths: read as 2, the rest would be a second request (smuggled /v1/models).
  {
    const Raw raw = Send(port,
                         "POST /v1/images/generations HTTP/1.1\r\nHost: x\r\n"
                         "Content-Type: application/json\r\nContent-Length: 2\r\n"
                         "Content-Length: 40\r\n\r\n{}" +
                             kModels);
    ASSERT_EQ(raw.responses.size(), 1u) << "a second request ran";
    EXPECT_EQ(raw.responses[0].status, 400) << raw.responses[0].body;
    EXPECT_EQ(raw.responses[0].headers.at("connection"), "close");
    EXPECT_TRUE(raw.closed);
  }
  // Content-Length together with chunked.
  {
    const Raw raw = Send(port,
                         "POST /v1/images/generations HTTP/1.1\r\nHost: x\r\n"
                         "Content-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "2\r\n{}\r\n0\r\n\r\n" +
                             kModels);
    ASSERT_EQ(raw.responses.size(), 1u);
    EXPECT_EQ(raw.responses[0].status, 400);
    EXPECT_TRUE(raw.closed);
  }
  // A coding the server does not read.
  {
    const Raw raw = Send(port,
                         "POST /v1/images/generations HTTP/1.1\r\nHost: x\r\n"
                         "Transfer-Encoding: gzip, chunked\r\n\r\n"
                         "2\r\n{}\r\n0\r\n\r\n");
    ASSERT_EQ(raw.responses.size(), 1u);
    EXPECT_EQ(raw.responses[0].status, 501) << raw.responses[0].body;
    EXPECT_TRUE(raw.closed);
  }
  // The same Content-Length twice is one length; chunked alone is read (its body, {}, lacks
  // a prompt); the connection stays open for the next request.
  {
    const Raw same = Send(port,
                          "POST /v1/images/generations HTTP/1.1\r\nHost: x\r\n"
                          "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}" +
                              kModels,
                          1.5);
    ASSERT_EQ(same.responses.size(), 2u);
    EXPECT_EQ(same.responses[0].status, 400);
    EXPECT_NE(same.responses[0].body.find("prompt"), std::string::npos);
    EXPECT_EQ(same.responses[1].status, 200);
    const Raw chunked = Send(port,
                             "POST /v1/images/generations HTTP/1.1\r\nHost: x\r\n"
                             "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
                             1.5);
    ASSERT_EQ(chunked.responses.size(), 1u);
    EXPECT_EQ(chunked.responses[0].status, 400);
    EXPECT_NE(chunked.responses[0].body.find("prompt"), std::string::npos);
    EXPECT_FALSE(chunked.closed);
  }
}

TEST(HttpFramingTest, MethodsPathsAndRequestIds) {
  auto server = ServerProcess::Start(kRepository);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->http_port();
  const std::string id = "X-Request-Id: trace-42\r\n";
  const auto one = [&](const std::string& bytes) {
    const Raw raw = Send(port, bytes + "", 1.0);
    EXPECT_EQ(raw.responses.size(), 1u) << bytes;
    return raw.responses.empty() ? Raw::Response() : raw.responses[0];
  };
  Raw::Response r = one("GET /v1/images/generations HTTP/1.1\r\nHost: x\r\n" + id + "\r\n");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers["allow"], "POST");
  EXPECT_EQ(r.headers["x-request-id"], "trace-42");
  r = one("DELETE /v1/models HTTP/1.1\r\nHost: x\r\n" + id + "\r\n");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers["allow"], "GET, HEAD");
  // No CORS origins: OPTIONS is not served.
  r = one("OPTIONS /v1/images/generations HTTP/1.1\r\nHost: x\r\nOrigin: https://a.example\r\n"
          "Access-Control-Request-Method: POST\r\n\r\n");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers["allow"], "POST");
  EXPECT_EQ(r.headers.count("access-control-allow-origin"), 0u);
  r = one("GET /v2/nothing HTTP/1.1\r\nHost: x\r\n" + id + "\r\n");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(ErrorCode(r), "not_found");
  EXPECT_EQ(r.headers["x-request-id"], "trace-42");
  r = one("GET /v1/models/nope HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(ErrorCode(r), "model_not_found");
  r = one("GET /v1/models HTTP/1.1\r\nHost: x\r\n" + id + "\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["x-request-id"], "trace-42");
  // Streamed: the id comes back on the event stream's headers too.
  const std::string body = Json{{"model", "tiny"}, {"prompt", kPrompt}, {"stream", true}}.dump();
  const Raw stream = Send(port,
                          "POST /v1/images/generations HTTP/1.1\r\nHost: x\r\n" + id +
                              "Content-Type: application/json\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
                              body,
                          30.0);
  ASSERT_EQ(stream.responses.size(), 1u);
  EXPECT_EQ(stream.responses[0].status, 200);
  EXPECT_EQ(stream.responses[0].headers.at("x-request-id"), "trace-42");
  EXPECT_NE(stream.responses[0].body.find("image_generation.completed"), std::string::npos);
}

TEST(HttpFramingTest, CorsPreflightsAndKeysInAnyCaseAndRevokedByAnEmptyFile) {
  const std::string keys = WriteTestFile("framing_keys", "sk-one\n");
  std::vector<std::string> flags = kRepository;
  flags.push_back("--api_keys_file=" + keys);
  flags.push_back("--http_cors_origins=https://app.example,https://b.example");
  auto server = ServerProcess::Start(flags);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->http_port();
  const auto one = [&](const std::string& bytes) {
    const Raw raw = Send(port, bytes, 1.0);
    EXPECT_EQ(raw.responses.size(), 1u) << bytes;
    return raw.responses.empty() ? Raw::Response() : raw.responses[0];
  };
  // A preflight carries no key: answered for an allowed origin.
  Raw::Response r = one(
      "OPTIONS /v1/images/generations HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example\r\n"
      "Access-Control-Request-Method: POST\r\n"
      "Access-Control-Request-Headers: authorization, content-type\r\n\r\n");
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(r.headers["access-control-allow-origin"], "https://app.example");
  EXPECT_NE(r.headers["access-control-allow-methods"].find("POST"), std::string::npos);
  EXPECT_NE(r.headers["access-control-allow-headers"].find("Authorization"), std::string::npos);
  r = one("OPTIONS /v1/models HTTP/1.1\r\nHost: x\r\nOrigin: https://evil.example\r\n\r\n");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers.count("access-control-allow-origin"), 0u);
  // The real call: the key in any case of the scheme; CORS headers on the answer, errors too.
  r = one("GET /v1/models HTTP/1.1\r\nHost: x\r\nOrigin: https://b.example\r\n"
          "Authorization: bearer sk-one\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["access-control-allow-origin"], "https://b.example");
  r = one("GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: BEARER   sk-one\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  r = one("GET /v1/models HTTP/1.1\r\nHost: x\r\nOrigin: https://b.example\r\n\r\n");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.headers["access-control-allow-origin"], "https://b.example");
  // Emptied and reloaded: every key is revoked (the log says so).
  WriteTestFile("framing_keys", "# every key revoked\n");
  (*server)->Signal(SIGHUP);
  bool revoked = false;
  for (int i = 0; i < 50 && !revoked; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    revoked = one("GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-one\r\n\r\n")
                  .status == 401;
  }
  EXPECT_TRUE(revoked);
  EXPECT_NE((*server)->Log().find("every key is revoked"), std::string::npos);
  auto stub = (*server)->NewStub();
  grpc::ClientContext context;
  context.AddMetadata("authorization", "Bearer sk-one");
  v1::ListModelsResponse models;
  EXPECT_EQ(stub->ListModels(&context, v1::ListModelsRequest(), &models).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace mulo::testing
