// TLS: with --tls_cert/--tls_key the server only speaks TLS, on gRPC and HTTP; a client
// trusting the certificate generates an image (or lists models over HTTPS), a plaintext client
// is refused.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <fstream>

#include "tests/server/server_process.h"

namespace mulo::testing {
namespace {

// What `command` prints on stdout.
std::string Output(const std::string& command) {
  std::string out;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
    pclose(pipe);
  }
  return out;
}

grpc::Status GenerateWith(std::shared_ptr<grpc::ChannelCredentials> credentials,
                          const std::string& address) {
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  auto stub = v1::ImageGeneration::NewStub(grpc::CreateCustomChannel(address, credentials, args));
  v1::GenerateRequest request;
  request.set_model("tiny");
  request.set_prompt("a small blue square at top left, over a white background");
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto reader = stub->Generate(&context, request);
  v1::GenerateResponse response;
  bool image = false;
  while (reader->Read(&response)) image = image || response.has_image();
  grpc::Status status = reader->Finish();
  if (status.ok() && !image) return grpc::Status(grpc::StatusCode::INTERNAL, "no image");
  return status;
}

TEST(TlsTest, ServesOverTlsAndRefusesPlaintext) {
  ASSERT_EQ(access("/usr/bin/openssl", X_OK), 0) << "openssl is missing";
  const std::string dir = TestTempDir();
  const std::string cert = dir + "/cert.pem", key = dir + "/key.pem";
  const std::string command = "/usr/bin/openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "
                              "/CN=localhost -addext subjectAltName=DNS:localhost -keyout " +
                              key + " -out " + cert + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0);
  auto server = ServerProcess::Start({"--model_repository=tests/data/repository",
                                      "--tls_cert=" + cert, "--tls_key=" + key});
  ASSERT_TRUE(server.ok()) << server.status();
  std::ifstream in(cert);
  grpc::SslCredentialsOptions options;
  options.pem_root_certs.assign(std::istreambuf_iterator<char>(in), {});
  grpc::Status tls = GenerateWith(grpc::SslCredentials(options), (*server)->address());
  EXPECT_TRUE(tls.ok()) << tls.error_message();
  grpc::Status plain = GenerateWith(grpc::InsecureChannelCredentials(), (*server)->address());
  EXPECT_EQ(plain.error_code(), grpc::StatusCode::UNAVAILABLE);

  // The HTTP API on the same flags: HTTPS for a client trusting the certificate (curl, a real
  // TLS stack), nothing for plain HTTP.
  ASSERT_EQ(access("/usr/bin/curl", X_OK), 0) << "curl is missing";
  const std::string url = "127.0.0.1:" + std::to_string((*server)->http_port()) + "/v1/models";
  const std::string https = "/usr/bin/curl -s --max-time 20 --cacert " + cert +
                            " --resolve localhost:" + std::to_string((*server)->http_port()) +
                            ":127.0.0.1 https://localhost:" +
                            std::to_string((*server)->http_port()) + "/v1/models";
  EXPECT_NE(Output(https).find("\"id\":\"tiny\""), std::string::npos) << Output(https);
  EXPECT_EQ(Output("/usr/bin/curl -s --max-time 5 -o /dev/null -w %{http_code} http://" + url),
            "000");
}

TEST(TlsTest, CertificateWithoutKeyIsAStartupError) {
  auto server = ServerProcess::Start({"--model_repository=tests/data/repository",
                                      "--tls_cert=" + TestTempDir() + "/cert.pem"});
  EXPECT_FALSE(server.ok());
}

}  // namespace
}  // namespace mulo::testing
