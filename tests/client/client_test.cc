// mulo_client as a user runs it, against a real mulo_server on the tiny family:
// generate writes a decodable PNG of the model's size and prints the Stats
// summary; models lists the family; errors print the server's status code and
// message and exit non-zero; bench prints its table with every request OK.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mulo/v1/method_names.h"
#include "tests/server/server_process.h"

namespace mulo::testing {
namespace {

struct ClientRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs client/mulo_client (from the runfiles) with `args` against `server`.
ClientRun Client(const ServerProcess& server, const std::vector<std::string>& args) {
  const std::string command = absl::StrCat("client/mulo_client --server=", server.address(), " ",
                                           absl::StrJoin(args, " "), " 2>&1");
  ClientRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) run.output.append(buffer, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

class ClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto started = ServerProcess::Start({"--model_repository=tests/data/repository"});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = started->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static ServerProcess* server_;
};
ServerProcess* ClientTest::server_ = nullptr;

// The image side in pixels that `mulo_client models` reports for the tiny
// family.
int TinyImageSize(const ServerProcess& server) {
  ClientRun run = Client(server, {"models"});
  int width = 0, height = 0;
  const size_t line = run.output.find("tiny ");
  if (line == std::string::npos ||
      std::sscanf(run.output.c_str() + line, "tiny %dx%d px", &width, &height) != 2) {
    ADD_FAILURE() << "no size in: " << run.output;
  }
  EXPECT_EQ(width, height);
  return width;
}

TEST_F(ClientTest, GenerateWritesThePngAndPrintsStats) {
  const int size = TinyImageSize(*server_);
  ASSERT_GT(size, 0);
  const std::string out = absl::StrCat(::testing::TempDir(), "/client_image.png");
  const std::vector<std::vector<std::string>> methods = {
      {"--method=ar"},
      {"--method=speculative"},
      {"--method=mulo"},
      {"--method=eagle"},
      {"--method=eagle:static_tree=true"},
      {"--method=lantern:k=4:delta=0.2:tree.static_tree=true"},
      {"--method=lantern++:k=4:lambda=3"},
      {"--method=sjd:window=8:init=repeat_horizon"},
      {"--method=gsd:window=8:group_size=4:max_embedding_distance=1e9"},
      {"--method=zipar:window=4"},
      {"--method=mc_sjd:window=8:coupling=1"},
      {"--method=sjd_pac:window=8:width=3:depth=3"},
      {"--method=auto"},
      {"--method=peanut:l_k=2:init=vertical_repeat:tree.total_tokens=12"},
      {"--method=mulo:zipar_window=4:resample=wavefront:resample_window=4"}};
  for (const std::vector<std::string>& method_args : methods) {
    const std::string method = absl::StrJoin(method_args, " ");
    std::remove(out.c_str());
    std::vector<std::string> args = {"generate", "--model=tiny",
                                     "--prompt='a small red circle in the top left'", "--seed=3",
                                     "--out=" + out};
    args.insert(args.end(), method_args.begin(), method_args.end());
    ClientRun run = Client(*server_, args);
    ASSERT_EQ(run.exit_code, 0) << method << ": " << run.output;
    cv::Mat image = cv::imread(out, cv::IMREAD_COLOR);
    ASSERT_FALSE(image.empty()) << method;
    EXPECT_EQ(image.cols, size);
    EXPECT_EQ(image.rows, size);
    EXPECT_NE(run.output.find("target forwards"), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("phases:"), std::string::npos) << run.output;
    if (method == "--method=auto") {  // the tiny family has no calibration table: ar
      EXPECT_NE(run.output.find("method ar\nauto: tiny's family.json has no cpu calibration"),
                std::string::npos)
          << run.output;
      continue;
    }
    if (method != "--method=ar" && method.find("--method=zipar") == std::string::npos) {
      EXPECT_NE(run.output.find("acceptance"), std::string::npos) << run.output;
    }
    if (method != "--method=ar") {
      EXPECT_NE(run.output.find("iterations"), std::string::npos) << run.output;
    }
    if (method.find("--method=peanut") != std::string::npos) {
      EXPECT_NE(run.output.find("mean tree depth"), std::string::npos) << run.output;
    }
    if (method.find("--method=gsd") != std::string::npos) {
      EXPECT_NE(run.output.find("pooled sets"), std::string::npos) << run.output;
    }
    if (method.find("lantern") != std::string::npos) {
      EXPECT_NE(run.output.find("pooled sets"), std::string::npos) << run.output;
    }
  }
}

TEST_F(ClientTest, ModelsListsTheFamilyAndItsMethods) {
  ClientRun run = Client(*server_, {"models"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("tiny"), std::string::npos) << run.output;
  // The tiny family has every component: it runs every method of the API, in its order.
  EXPECT_NE(run.output.find(absl::StrJoin(v1::ApiMethodNames(), ",")), std::string::npos)
      << run.output;
}

TEST_F(ClientTest, HelpListsTheProgramsOwnFlags) {
  // `--help` of both binaries lists their own flags (not "No flags matched") and no library's.
  ClientRun client = Client(*server_, {"--help"});
  EXPECT_NE(client.output.find("--method"), std::string::npos) << client.output;
  // Every method's options, from the proto's descriptor.
  EXPECT_NE(client.output.find("  sjd: window (integer), init (random | repeat_horizon)"),
            std::string::npos)
      << client.output;
  EXPECT_EQ(client.output.find("No flags matched"), std::string::npos) << client.output;
  FILE* pipe = popen("server/mulo_server --help 2>&1", "r");
  ASSERT_NE(pipe, nullptr);
  std::string server_help;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) server_help.append(buffer, n);
  pclose(pipe);
  for (const char* flag : {"--model_repository", "--max_batch", "--max_decode_time",
                           "--max_tree_nodes", "--drain_timeout"}) {
    EXPECT_NE(server_help.find(flag), std::string::npos) << flag << " in " << server_help;
  }
  EXPECT_EQ(server_help.find("--flagfile"), std::string::npos) << "library flags stay out";
}

TEST_F(ClientTest, ServerErrorsPrintCodeAndMessageAndExitNonZero) {
  ClientRun unknown =
      Client(*server_, {"generate", "--model=nope", "--prompt=x", "--out=/dev/null"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.output.find("error: NOT_FOUND"), std::string::npos) << unknown.output;
  ClientRun bad = Client(*server_, {"generate", "--model=tiny", "--prompt=x",
                                    "--method=mulo:tau=-1", "--out=/dev/null"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("error: INVALID_ARGUMENT"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("mulo.tau"), std::string::npos) << bad.output;
  // A flag the client itself rejects: usage error, nothing sent.
  ClientRun method = Client(*server_, {"generate", "--model=tiny", "--prompt=x", "--method=beam"});
  EXPECT_EQ(method.exit_code, 2);
  EXPECT_NE(method.output.find("error: --method: 'beam' is not a method of the API (ar, "),
            std::string::npos)
      << method.output;
  ClientRun option =
      Client(*server_, {"generate", "--model=tiny", "--prompt=x", "--method=sjd:windows=4"});
  EXPECT_EQ(option.exit_code, 2);
  EXPECT_NE(option.output.find("error: --method: 'windows' is not an option of sjd (window, init)"),
            std::string::npos)
      << option.output;
}

TEST_F(ClientTest, BenchReportsEveryRequest) {
  ClientRun run =
      Client(*server_, {"bench", "--model=tiny", "--prompt=x", "--requests=3", "--concurrency=2"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // "| requests | concurrency | ok | errors | ..." then the row "| 3 | 2 | 3 |
  // 0 | ...".
  EXPECT_NE(run.output.find("| 3 | 2 | 3 | 0 |"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace mulo::testing
