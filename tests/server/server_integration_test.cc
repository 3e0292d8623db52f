// mulo_server end to end: a real server process on loopback ports serving the tiny model
// family (tests/data/repository), driven through the gRPC API.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <opencv2/imgcodecs.hpp>
#include <thread>

#include "tests/server/grpc_calls.h"
#include "tests/server/server_process.h"

namespace mulo::testing {
namespace {

TEST(ServerIntegrationTest, StreamsRowsInOrderAndReturnsTheImage) {
  auto server = ServerProcess::Start(kRepository);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(Health(**server), grpc::health::v1::HealthCheckResponse::SERVING);
  auto stub = (*server)->NewStub();

  grpc::ClientContext list_context;
  v1::ListModelsResponse models;
  ASSERT_TRUE(stub->ListModels(&list_context, v1::ListModelsRequest(), &models).ok());
  ASSERT_EQ(models.models_size(), 1);
  EXPECT_EQ(models.models(0).name(), "tiny");
  const int grid = static_cast<int>(models.models(0).grid_size());
  const int pixels = static_cast<int>(models.models(0).image_width());

  StreamResult result = RunStream(*stub, ValidRequest());
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_TRUE(result.image.has_value());
  cv::Mat decoded = cv::imdecode(
      std::vector<uchar>(result.image->data().begin(), result.image->data().end()),
      cv::IMREAD_COLOR);
  EXPECT_EQ(decoded.cols, pixels);
  EXPECT_EQ(decoded.rows, pixels);
  EXPECT_EQ(static_cast<int>(result.image->width()), pixels);
  ASSERT_EQ(result.image->tokens_size(), grid * grid);
  // Rows arrive in order, each once, and together they are the final token grid.
  std::vector<uint32_t> streamed;
  uint32_t next_row = 0;
  for (const auto& rows : result.rows) {
    EXPECT_EQ(rows.first_row(), next_row);
    EXPECT_EQ(static_cast<int>(rows.width()), grid);
    next_row += rows.tokens_size() / rows.width();
    streamed.insert(streamed.end(), rows.tokens().begin(), rows.tokens().end());
  }
  EXPECT_EQ(static_cast<int>(next_row), grid);
  EXPECT_EQ(streamed, std::vector<uint32_t>(result.image->tokens().begin(),
                                            result.image->tokens().end()));
  EXPECT_EQ(result.image->stats().tokens(), static_cast<uint32_t>(grid * grid));
  // Same seed, same image.
  StreamResult again = RunStream(*stub, ValidRequest());
  ASSERT_TRUE(again.status.ok());
  EXPECT_EQ(again.image->tokens_size(), result.image->tokens_size());
  EXPECT_TRUE(std::equal(again.image->tokens().begin(), again.image->tokens().end(),
                         result.image->tokens().begin()));
  // Speculative decoding with the chain draft model, greedy: the same tokens as AR greedy.
  v1::GenerateRequest greedy = ValidRequest();
  greedy.mutable_sampling()->set_temperature(0);
  StreamResult ar = RunStream(*stub, greedy);
  greedy.mutable_speculative()->set_gamma(3);
  StreamResult sd = RunStream(*stub, greedy);
  ASSERT_TRUE(ar.status.ok() && sd.status.ok()) << sd.status.error_message();
  EXPECT_TRUE(std::equal(sd.image->tokens().begin(), sd.image->tokens().end(),
                         ar.image->tokens().begin()));
  EXPECT_GT(sd.image->stats().drafted_tokens(), 0u);
  // EAGLE-2 (dynamic tree) and EAGLE-1 (static tree), greedy: the same tokens as AR greedy.
  for (bool static_tree : {false, true}) {
    v1::GenerateRequest tree = ValidRequest();
    tree.mutable_sampling()->set_temperature(0);
    tree.mutable_eagle()->set_static_tree(static_tree);
    StreamResult eagle = RunStream(*stub, tree);
    ASSERT_TRUE(eagle.status.ok()) << eagle.status.error_message();
    EXPECT_TRUE(std::equal(eagle.image->tokens().begin(), eagle.image->tokens().end(),
                           ar.image->tokens().begin(), ar.image->tokens().end()))
        << "static " << static_tree;
    EXPECT_GT(eagle.image->stats().drafted_tokens(), 0u);
  }
  // MuLo-SD with tau > 1 re-samples everything: the same tokens as AR for the same seed.
  v1::GenerateRequest mulo = ValidRequest(7);
  StreamResult ar_sampled = RunStream(*stub, mulo);
  mulo.mutable_mulo()->set_tau(1.5);
  StreamResult mulo_all = RunStream(*stub, mulo);
  ASSERT_TRUE(ar_sampled.status.ok() && mulo_all.status.ok()) << mulo_all.status.error_message();
  EXPECT_TRUE(std::equal(mulo_all.image->tokens().begin(), mulo_all.image->tokens().end(),
                         ar_sampled.image->tokens().begin()));
  EXPECT_EQ(mulo_all.image->stats().resampled_tokens(), static_cast<uint32_t>(grid * grid));
  mulo.mutable_mulo()->set_tau(1e-4);
  StreamResult mulo_default = RunStream(*stub, mulo);
  ASSERT_TRUE(mulo_default.status.ok()) << mulo_default.status.error_message();
  EXPECT_EQ(mulo_default.image->stats().drafted_tokens(), static_cast<uint32_t>(grid * grid));
  EXPECT_EQ((*server)->MetricSum("mulo_requests_total", {"code=\"OK\""}), 9);
  // ar drafts nothing: no speculative series for it at all (not zeros).
  EXPECT_EQ((*server)->MetricSum("mulo_spec_drafted_tokens_total", {"method=\"ar\""}), -1);
  EXPECT_EQ((*server)->MetricSum("mulo_spec_accepted_tokens_total", {"method=\"ar\""}), -1);
  EXPECT_GT((*server)->MetricSum("mulo_generated_tokens_total", {"method=\"ar\""}), 0);
  EXPECT_EQ((*server)->MetricSum("mulo_spec_drafted_tokens_total", {"method=\"speculative\""}),
            sd.image->stats().drafted_tokens());
  // Per-method counters: the two MuLo-SD requests add up, apart from speculative's.
  const auto& all = mulo_all.image->stats();
  const auto& dflt = mulo_default.image->stats();
  EXPECT_EQ((*server)->MetricSum("mulo_spec_drafted_tokens_total", {"method=\"mulo\""}),
            all.drafted_tokens() + dflt.drafted_tokens());
  EXPECT_EQ((*server)->MetricSum("mulo_spec_accepted_tokens_total", {"method=\"mulo\""}),
            all.accepted_tokens() + dflt.accepted_tokens());
  EXPECT_EQ((*server)->MetricSum("mulo_spec_resampled_tokens_total", {"method=\"mulo\""}),
            all.resampled_tokens() + dflt.resampled_tokens());
  EXPECT_EQ((*server)->MetricSum("mulo_spec_accepted_tokens_total", {"method=\"speculative\""}),
            sd.image->stats().accepted_tokens());
  // MuLo-SD's own counters: pooling rescues, expansion re-samples and the drafter prefix by
  // source, each the sum of the two responses' stats.
  EXPECT_EQ((*server)->MetricSum("mulo_spec_relaxed_accepted_tokens_total", {"method=\"mulo\""}),
            all.relaxed_accepted_tokens() + dflt.relaxed_accepted_tokens());
  EXPECT_EQ(
      (*server)->MetricSum("mulo_spec_expansion_resampled_tokens_total", {"method=\"mulo\""}),
      all.expansion_resampled_tokens() + dflt.expansion_resampled_tokens());
  EXPECT_EQ((*server)->MetricSum("mulo_draft_prefix_tokens_total",
                                 {"method=\"mulo\"", "source=\"own\""}),
            all.prefix_own_tokens() + dflt.prefix_own_tokens());
  EXPECT_EQ((*server)->MetricSum("mulo_draft_prefix_tokens_total",
                                 {"method=\"mulo\"", "source=\"downsampled\""}),
            all.prefix_downsampled_tokens() + dflt.prefix_downsampled_tokens());
  // Every low-resolution token of each image is some prefix token exactly once.
  EXPECT_EQ(dflt.prefix_own_tokens() + dflt.prefix_downsampled_tokens(),
            dflt.drafted_tokens() / 4);
  // The drafter-prefix option reaches the engine: tau 0 greedy with the drafter keeping its
  // own rows is U_r of the drafter's whole greedy image, drafted in one step.
  v1::GenerateRequest accept_all = ValidRequest();
  accept_all.mutable_sampling()->set_temperature(0);
  accept_all.mutable_mulo()->set_tau(0);
  accept_all.mutable_mulo()->set_draft_rows(static_cast<uint32_t>(grid));  // one whole draft
  StreamResult whole = RunStream(*stub, accept_all);
  accept_all.mutable_mulo()->set_draft_rows(1);
  accept_all.mutable_mulo()->set_draft_prefix(v1::MuloParams::KEEP_DRAFTED);
  StreamResult kept = RunStream(*stub, accept_all);
  ASSERT_TRUE(whole.status.ok() && kept.status.ok()) << kept.status.error_message();
  EXPECT_TRUE(std::equal(kept.image->tokens().begin(), kept.image->tokens().end(),
                         whole.image->tokens().begin(), whole.image->tokens().end()));
  EXPECT_EQ(kept.image->stats().accepted_tokens(), static_cast<uint32_t>(grid * grid));
}

TEST(ServerIntegrationTest, TheAcceptanceMapComesOnlyWhenAskedAndCountsTheStats) {
  auto server = ServerProcess::Start(kRepository);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = (*server)->NewStub();
  v1::GenerateRequest request = ValidRequest(3);
  request.mutable_speculative()->set_gamma(3);
  StreamResult plain = RunStream(*stub, request);
  ASSERT_TRUE(plain.status.ok()) << plain.status.error_message();
  EXPECT_TRUE(plain.image->stats().commit_map().empty()) << "not asked: no map";
  request.set_return_commit_map(true);
  StreamResult mapped = RunStream(*stub, request);
  ASSERT_TRUE(mapped.status.ok()) << mapped.status.error_message();
  const v1::Stats& stats = mapped.image->stats();
  const std::string& map = stats.commit_map();
  ASSERT_EQ(map.size(), static_cast<size_t>(mapped.image->tokens_size()));
  // Code 1 re-drawn, 1 + d a draft kept at depth d, 0 the target's own.
  uint32_t kept = 0, redrawn = 0;
  std::vector<uint32_t> per_depth(stats.accepted_per_position_size(), 0);
  for (char c : map) {
    const uint8_t code = static_cast<uint8_t>(c);
    redrawn += code == 1;
    if (code >= 2) {
      ++kept;
      ASSERT_LE(code - 1, static_cast<int>(per_depth.size()));
      ++per_depth[code - 2];
    }
  }
  EXPECT_GT(kept, 0u);
  EXPECT_EQ(kept, stats.accepted_tokens());
  EXPECT_EQ(redrawn, stats.resampled_tokens());
  EXPECT_EQ(per_depth, std::vector<uint32_t>(stats.accepted_per_position().begin(),
                                             stats.accepted_per_position().end()));
  // Asking changes nothing else: the same tokens.
  EXPECT_TRUE(std::equal(mapped.image->tokens().begin(), mapped.image->tokens().end(),
                         plain.image->tokens().begin(), plain.image->tokens().end()));
}

TEST(ServerIntegrationTest, DeadlineMidStreamStopsTheRequestAndFreesTheWorker) {
  auto server = ServerProcess::Start(kRepository);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = (*server)->NewStub();
  // Time a full request, then give the next one a fraction of that as its deadline.
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(RunStream(*stub, ValidRequest()).status.ok());
  const double full = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  StreamResult cut = RunStream(*stub, ValidRequest(2), full * 0.4);
  EXPECT_EQ(cut.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_FALSE(cut.image.has_value());
  // The worker lets go of the request promptly: running returns to 0, and the request is
  // counted (the count is written as the handler returns, which can trail the client's error).
  double running = -1, deadline_exceeded = -1;
  for (int i = 0; i < 100 && (running != 0 || deadline_exceeded != 1); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    running = (*server)->MetricSum("mulo_requests_running", {});
    deadline_exceeded =
        (*server)->MetricSum("mulo_requests_total", {"code=\"DEADLINE_EXCEEDED\""});
  }
  EXPECT_EQ(running, 0);
  EXPECT_EQ(deadline_exceeded, 1) << (*server)->Log();
  EXPECT_TRUE(RunStream(*stub, ValidRequest(3)).status.ok());
}

TEST(ServerIntegrationTest, MalformedRequestsAreInvalidArgumentNamingTheField) {
  auto server = ServerProcess::Start(kRepository);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = (*server)->NewStub();
  const std::vector<BadRequest> bad = {
      {"model", [](auto* r) { r->clear_model(); }},
      {"prompt", [](auto* r) { r->clear_prompt(); }},
      {"prompt", [](auto* r) { r->set_prompt(std::string(2000, 'a')); }},
      {"prompt", [](auto* r) { r->set_prompt("   "); }},
      {"prompt", [](auto* r) {
         std::string many;
         for (int i = 0; i < 40; ++i) many += "red ";
         r->set_prompt(many);
       }},
      {"sampling.cfg_scale", [](auto* r) { r->mutable_sampling()->set_cfg_scale(-1); }},
      {"sampling.cfg_scale", [](auto* r) { r->mutable_sampling()->set_cfg_scale(1e6); }},
      {"sampling.temperature", [](auto* r) { r->mutable_sampling()->set_temperature(-0.5); }},
      {"sampling.temperature", [](auto* r) { r->mutable_sampling()->set_temperature(NAN); }},
      {"sampling.top_k", [](auto* r) { r->mutable_sampling()->set_top_k(100000); }},
      {"sampling.top_p", [](auto* r) { r->mutable_sampling()->set_top_p(0); }},
      {"mulo.tau", [](auto* r) { r->mutable_mulo()->set_tau(-1); }},
      {"speculative.gamma", [](auto* r) { r->mutable_speculative()->set_gamma(0); }},
      {"image_format", [](auto* r) { r->set_image_format(static_cast<v1::ImageFormat>(42)); }},
      {"stream.preview_every_rows", [](auto* r) { r->mutable_stream()->set_preview_every_rows(1000); }},
      {"condition", [](auto* r) { r->add_condition(1.0f); }},
      {"condition", [](auto* r) {
         for (int i = 0; i < 24 * 16; ++i) r->add_condition(i == 5 ? NAN : 0.0f);
       }},
      {"request_id", [](auto* r) { r->set_request_id(std::string(200, 'x')); }},
      {"mulo.delta", [](auto* r) { r->mutable_mulo()->set_delta(2); }},
      {"mulo.rejection",
       [](auto* r) { r->mutable_mulo()->set_rejection(static_cast<v1::MuloParams::Rejection>(9)); }},
      {"mulo.draft_prefix", [](auto* r) {
         r->mutable_mulo()->set_draft_prefix(static_cast<v1::MuloParams::DraftPrefix>(9));
       }},
  };
  ASSERT_EQ(bad.size(), 21u);
  ExpectEachRefusedNamingItsField(*stub, bad);
  v1::GenerateRequest unknown = ValidRequest();
  unknown.set_model("nope");
  EXPECT_EQ(RunStream(*stub, unknown).status.error_code(), grpc::StatusCode::NOT_FOUND);
  // Still healthy and serving.
  EXPECT_EQ(Health(**server), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_TRUE(RunStream(*stub, ValidRequest()).status.ok());
  EXPECT_EQ((*server)->MetricSum("mulo_requests_total", {"code=\"INVALID_ARGUMENT\""}), 21);
}

// PEANUT over the wire: greedy it is ar's image; with the adaptation off it is EAGLE-2's for
// the same seed and initial tree; Stats and the metrics report its trees' depth and width; a
// bad parameter is INVALID_ARGUMENT naming it.
TEST(ServerIntegrationTest, PeanutIsServedAndReducesToEagle2) {
  auto server = ServerProcess::Start(kRepository);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = (*server)->NewStub();
  v1::GenerateRequest greedy = ValidRequest(4);
  greedy.mutable_sampling()->set_temperature(0.0);
  const StreamResult ar = RunStream(*stub, greedy);
  ASSERT_TRUE(ar.status.ok()) << ar.status.error_message();
  greedy.mutable_peanut();
  const StreamResult peanut = RunStream(*stub, greedy);
  ASSERT_TRUE(peanut.status.ok()) << peanut.status.error_message();
  EXPECT_EQ(ImageTokens(peanut), ImageTokens(ar));
  EXPECT_GT(peanut.image->stats().mean_tree_depth(), 0.0);
  EXPECT_GT(peanut.image->stats().mean_tree_width(), 0.0);

  v1::GenerateRequest sampled = ValidRequest(5);
  sampled.mutable_eagle()->set_total_tokens(12);
  sampled.mutable_eagle()->set_depth(3);
  sampled.mutable_eagle()->set_top_k(3);
  const StreamResult eagle = RunStream(*stub, sampled);
  ASSERT_TRUE(eagle.status.ok()) << eagle.status.error_message();
  v1::PeanutParams* p = sampled.mutable_peanut();
  p->set_l_d(0);
  p->set_l_k(0);
  p->mutable_tree()->set_total_tokens(12);
  p->mutable_tree()->set_depth(3);
  p->mutable_tree()->set_top_k(3);
  const StreamResult fixed = RunStream(*stub, sampled);
  ASSERT_TRUE(fixed.status.ok()) << fixed.status.error_message();
  EXPECT_EQ(ImageTokens(fixed), ImageTokens(eagle));
  EXPECT_EQ(fixed.image->stats().mean_tree_width(), 3.0);
  // Counters hold integer sums; the Stats carry their means.
  EXPECT_NEAR((*server)->MetricSum("mulo_spec_tree_width_total", {"method=\"peanut\""}),
              peanut.image->stats().mean_tree_width() * peanut.image->stats().iterations() +
                  3.0 * fixed.image->stats().iterations(),
              0.5);

  const std::vector<BadRequest> bad = {
      {"peanut.beta", [](auto* r) { r->mutable_peanut()->set_beta(0); }},
      {"peanut.lantern_delta", [](auto* r) { r->mutable_peanut()->set_lantern_delta(3); }},
      {"peanut.tree.static_tree",
       [](auto* r) { r->mutable_peanut()->mutable_tree()->set_static_tree(true); }},
      {"peanut.init",
       [](auto* r) { r->mutable_peanut()->set_init(static_cast<v1::PeanutParams::Init>(9)); }},
  };
  ExpectEachRefusedNamingItsField(*stub, bad);
}

// LANTERN and LANTERN++ over the wire: with the relaxation off they return EAGLE's image for
// the same seed; with it on they report their pooled sets in Stats and the metrics; a bad
// parameter is INVALID_ARGUMENT naming it.
TEST(ServerIntegrationTest, LanternRequestsReduceToEagleAndReportTheirPooledSets) {
  auto server = ServerProcess::Start(kRepository);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = (*server)->NewStub();
  v1::GenerateRequest request = ValidRequest(3);
  double lossless_pooled = 0;  // lambda 1 still forms its pooled sets (pooling nothing)
  for (bool static_tree : {false, true}) {
    request.mutable_eagle()->set_static_tree(static_tree);
    StreamResult eagle = RunStream(*stub, request);
    ASSERT_TRUE(eagle.status.ok()) << eagle.status.error_message();
    request.mutable_lantern()->set_delta(0.0);
    request.mutable_lantern()->mutable_tree()->set_static_tree(static_tree);
    StreamResult lantern = RunStream(*stub, request);
    ASSERT_TRUE(lantern.status.ok()) << lantern.status.error_message();
    EXPECT_EQ(ImageTokens(lantern), ImageTokens(eagle)) << "static " << static_tree;
    if (static_tree) {
      request.mutable_lantern_plus_plus()->set_lambda(1.0);
      StreamResult plus = RunStream(*stub, request);
      ASSERT_TRUE(plus.status.ok()) << plus.status.error_message();
      EXPECT_EQ(ImageTokens(plus), ImageTokens(eagle));
      EXPECT_EQ(plus.image->stats().relaxed_accepted_tokens(), 0u);
      lossless_pooled = plus.image->stats().pooled_drafts();
    }
  }
  request.mutable_lantern_plus_plus()->set_lambda(5.0);
  request.mutable_lantern_plus_plus()->set_k(8);
  StreamResult relaxed = RunStream(*stub, request);
  ASSERT_TRUE(relaxed.status.ok()) << relaxed.status.error_message();
  const v1::Stats& stats = relaxed.image->stats();
  EXPECT_GT(stats.pooled_drafts(), 0u);
  EXPECT_GT(stats.mean_pooled_neighbors(), 0.0);
  EXPECT_LE(stats.mean_pooled_neighbors(), 8.0);
  EXPECT_EQ((*server)->MetricSum("mulo_spec_pooled_drafts_total", {"method=\"lantern++\""}),
            lossless_pooled + stats.pooled_drafts());
  EXPECT_EQ((*server)->MetricSum("mulo_spec_relaxed_accepted_tokens_total",
                                 {"method=\"lantern++\""}),
            stats.relaxed_accepted_tokens() + 0.0);
  request.mutable_lantern()->set_delta(2.0);
  StreamResult bad = RunStream(*stub, request);
  EXPECT_EQ(bad.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(bad.status.error_message().rfind("lantern.delta:", 0), 0u)
      << bad.status.error_message();
}

// The training-free methods over the wire: greedy SJD is AR's image, ZipAR with the grid width
// is AR's sampled image, GSD with group_size 1 is SJD's; Stats and the metrics count the
// iterations; a bad parameter is INVALID_ARGUMENT naming it.
TEST(ServerIntegrationTest, TrainingFreeMethodsAreServedAndReduceToTheirLosslessForms) {
  auto server = ServerProcess::Start(kRepository);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = (*server)->NewStub();
  auto run = [&](const v1::GenerateRequest& request) {
    StreamResult r = RunStream(*stub, request);
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_TRUE(r.image.has_value());
    return r;
  };
  v1::GenerateRequest greedy = ValidRequest(5);
  greedy.mutable_sampling()->set_temperature(0.0);
  const StreamResult ar_greedy = run(greedy);
  greedy.mutable_sjd()->set_window(8);
  greedy.mutable_sjd()->set_init(v1::REPEAT_HORIZON);
  const StreamResult sjd = run(greedy);
  EXPECT_EQ(ImageTokens(sjd), ImageTokens(ar_greedy));
  EXPECT_EQ(sjd.image->stats().iterations() + 1, sjd.image->stats().target_forward_passes());

  v1::GenerateRequest sampled = ValidRequest(6);
  const StreamResult ar = run(sampled);
  sampled.mutable_zipar()->set_window(32);  // the tiny family's grid width
  const StreamResult zipar_ar = run(sampled);
  EXPECT_EQ(ImageTokens(zipar_ar), ImageTokens(ar));
  sampled.mutable_zipar()->set_window(8);
  const StreamResult zipar = run(sampled);
  EXPECT_EQ(zipar.image->stats().target_forward_passes(), 2u * 32 + 30u * 8);
  const v1::RowsEvent& last = zipar.rows.back();
  EXPECT_EQ(last.first_row() + last.tokens_size() / last.width(), 32u);  // rows stream in order

  sampled.mutable_sjd()->set_window(4);
  const StreamResult sjd_sampled = run(sampled);
  sampled.mutable_gsd()->set_window(4);
  sampled.mutable_gsd()->set_group_size(1);
  const StreamResult gsd = run(sampled);
  EXPECT_EQ(ImageTokens(gsd), ImageTokens(sjd_sampled));
  EXPECT_EQ((*server)->MetricSum("mulo_decode_iterations_total", {"method=\"sjd\""}),
            sjd.image->stats().iterations() + sjd_sampled.image->stats().iterations() + 0.0);
  EXPECT_EQ((*server)->MetricSum("mulo_decode_iterations_total", {"method=\"zipar\""}),
            zipar_ar.image->stats().iterations() + zipar.image->stats().iterations() + 0.0);

  const std::vector<BadRequest> bad = {
      {"sjd.window", [](auto* r) { r->mutable_sjd()->set_window(0); }},
      {"sjd.init", [](auto* r) { r->mutable_sjd()->set_init(static_cast<v1::JacobiInit>(7)); }},
      {"gsd.group_size", [](auto* r) { r->mutable_gsd()->set_group_size(0); }},
      {"gsd.max_probability_gap", [](auto* r) { r->mutable_gsd()->set_max_probability_gap(2); }},
      {"zipar.window", [](auto* r) { r->mutable_zipar()->set_window(33); }},
  };
  ExpectEachRefusedNamingItsField(*stub, bad);
}

TEST(ServerIntegrationTest, Bfloat16WeightsServeInHalfTheBytesAndBadDtypesAreRefused) {
  auto f32 = ServerProcess::Start(kRepository);
  ASSERT_TRUE(f32.ok()) << f32.status();
  const double f32_bytes = (*f32)->MetricSum("mulo_model_weight_bytes", {"model=\"tiny\""});
  std::vector<std::string> flags = kRepository;
  flags.push_back("--dtype=bfloat16");
  auto bf16 = ServerProcess::Start(flags);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  const double bf16_bytes = (*bf16)->MetricSum("mulo_model_weight_bytes", {"model=\"tiny\""});
  // Every floating weight halves; the int64 neighbour table does not.
  EXPECT_LT(bf16_bytes, 0.75 * f32_bytes) << bf16_bytes << " vs " << f32_bytes;
  EXPECT_GT(bf16_bytes, 0.4 * f32_bytes) << bf16_bytes << " vs " << f32_bytes;
  auto stub = (*bf16)->NewStub();
  v1::GenerateRequest request = ValidRequest(3);
  for (int method = 0; method < 3; ++method) {
    if (method == 1) request.mutable_speculative()->set_gamma(4);
    if (method == 2) request.mutable_mulo();
    StreamResult r = RunStream(*stub, request);
    ASSERT_TRUE(r.status.ok()) << method << ": " << r.status.error_message();
    EXPECT_EQ(static_cast<uint32_t>(r.image->tokens_size()), r.image->stats().tokens());
    EXPECT_GT(r.image->tokens_size(), 0);
  }
  flags.back() = "--dtype=float64";
  auto refused = ServerProcess::Start(flags);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(std::string(refused.status().message()).find("--dtype: expected float32 or bfloat16"),
            std::string::npos)
      << refused.status();
}

// Continuous batching: requests of three methods decoded together in one worker's batches
// return the tokens the same requests get from a server that decodes them one at a time,
// and the batch histograms show that forwards carried several requests.
TEST(ServerIntegrationTest, BatchedRequestsGetTheirLoneTokensAndTheBatchesAreCounted) {
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < 6; ++i) {
    v1::GenerateRequest r = ValidRequest(20 + i);
    if (i % 3 == 1) r.mutable_speculative()->set_gamma(3);
    if (i % 3 == 2) r.mutable_mulo();
    requests.push_back(r);
  }
  std::vector<std::string> lone_flags = kRepository;
  lone_flags.push_back("--max_batch=1");
  auto lone = ServerProcess::Start(lone_flags);
  ASSERT_TRUE(lone.ok()) << lone.status();
  std::vector<std::vector<uint32_t>> expected;
  auto lone_stub = (*lone)->NewStub();
  for (const auto& r : requests) {
    StreamResult result = RunStream(*lone_stub, r);
    ASSERT_TRUE(result.status.ok()) << result.status.error_message();
    expected.push_back(ImageTokens(result));
  }
  EXPECT_LE((*lone)->MetricSum("mulo_batch_size_count", {}), 0);  // -1: no batch was ever run

  std::vector<std::string> batch_flags = kRepository;
  batch_flags.push_back("--max_batch=6");
  batch_flags.push_back("--batch_wait=200ms");
  batch_flags.push_back("--batch_methods=all");  // the default, named so the test keeps it
  auto batched = ServerProcess::Start(batch_flags);
  ASSERT_TRUE(batched.ok()) << batched.status();
  std::vector<StreamResult> results(requests.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] {
      auto stub = (*batched)->NewStub();
      results[i] = RunStream(*stub, requests[i]);
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(results[i].status.ok()) << i << ": " << results[i].status.error_message();
    EXPECT_EQ(ImageTokens(results[i]), expected[i]) << "request " << i;
  }
  const std::vector<std::string> transformer = {"component=\"transformer\""};
  const double forwards = (*batched)->MetricSum("mulo_batch_size_count", transformer);
  const double carried = (*batched)->MetricSum("mulo_batch_size_sum", transformer);
  EXPECT_GT(forwards, 0);
  EXPECT_GT(carried, 1.5 * forwards) << carried << " requests in " << forwards << " forwards";
  EXPECT_GE((*batched)->MetricSum("mulo_batch_tokens_sum", transformer), 2 * carried);
  // The MuLo-SD requests' U_r and D_r calls run in the batches too, under their own label.
  EXPECT_GT((*batched)->MetricSum("mulo_batch_size_count", {"component=\"resampler\""}), 0);
  EXPECT_LE((*batched)->MetricSum("mulo_batch_size_count", {"component=\"eagle_head\""}), 0);
  // So do the speculative requests' chain judgements, and the device draws.
  EXPECT_GT((*batched)->MetricSum("mulo_batch_size_count", {"component=\"verifier\""}), 0);
  EXPECT_GT((*batched)->MetricSum("mulo_batch_size_count", {"component=\"sampler\""}), 0);
  // The worker's KV-cache pools were made at load for six requests (two slots each), and
  // every slot is back once the requests ended.
  for (const char* component : {"target", "drafter", "chain"}) {
    const std::vector<std::string> pool = {"model=\"tiny\"",
                                           std::string("component=\"") + component + "\""};
    EXPECT_EQ((*batched)->MetricSum("mulo_kv_cache_slots", pool), 12) << component;
    EXPECT_EQ((*batched)->MetricSum("mulo_kv_cache_used_slots", pool), 0) << component;
    EXPECT_EQ((*batched)->MetricSum("mulo_kv_cache_usage_ratio", pool), 0) << component;
    EXPECT_EQ((*batched)->MetricSum("mulo_kv_cache_overflows_total", pool), 0) << component;
  }

  for (const char* bad : {"--max_batch=0", "--batch_gemms=padded", "--max_batch_tokens=0",
                          "--batch_methods=ar,warp", "--default_method=warp",
                          "--kv_cache_memory=-1"}) {
    std::vector<std::string> flags = kRepository;
    flags.push_back(bad);
    auto refused = ServerProcess::Start(flags);
    ASSERT_FALSE(refused.ok()) << bad;
    const std::string flag(bad, std::string(bad).find('='));
    EXPECT_NE(std::string(refused.status().message()).find(flag + ":"), std::string::npos)
        << refused.status();
  }
}

// --default_method=auto: a request naming no method runs what auto picks (the test family has
// no calibration table: ar, said so in the stats); one naming a method runs that method.
TEST(ServerIntegrationTest, TheDefaultMethodServesRequestsThatNameNone) {
  std::vector<std::string> flags = kRepository;
  flags.push_back("--default_method=auto");
  auto server = ServerProcess::Start(flags);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = (*server)->NewStub();
  StreamResult defaulted = RunStream(*stub, ValidRequest(7));
  ASSERT_TRUE(defaulted.status.ok()) << defaulted.status.error_message();
  ASSERT_TRUE(defaulted.image.has_value());
  EXPECT_EQ(defaulted.image->stats().method(), "ar");
  EXPECT_EQ(defaulted.image->stats().method_choice(),
            "auto: tiny's family.json has no cpu calibration (tools/synth/calibrate_auto.py): "
            "ran ar");
  v1::GenerateRequest named = ValidRequest(7);
  named.mutable_sjd()->set_window(4);
  StreamResult sjd = RunStream(*stub, named);
  ASSERT_TRUE(sjd.status.ok()) << sjd.status.error_message();
  EXPECT_EQ(sjd.image->stats().method(), "sjd");
  EXPECT_EQ(sjd.image->stats().method_choice(), "");
}

// --batch_methods: requests of a method left out decode alone, one at a time per worker (no
// batched forward carries them), those of a listed method batch.
TEST(ServerIntegrationTest, OnlyTheListedMethodsJoinTheBatch) {
  std::vector<std::string> flags = kRepository;
  for (const char* flag : {"--max_batch=4", "--batch_methods=ar"}) flags.push_back(flag);
  auto server = ServerProcess::Start(flags);
  ASSERT_TRUE(server.ok()) << server.status();
  const auto run = [&](uint64_t seed, bool speculative) {
    v1::GenerateRequest r = ValidRequest(seed);
    if (speculative) r.mutable_speculative()->set_gamma(3);
    auto stub = (*server)->NewStub();
    StreamResult result = RunStream(*stub, r);
    EXPECT_TRUE(result.status.ok()) << result.status.error_message();
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) threads.emplace_back(run, 40 + i, /*speculative=*/true);
  for (auto& t : threads) t.join();
  threads.clear();
  EXPECT_LE((*server)->MetricSum("mulo_batch_size_count", {}), 0)
      << "a speculative request joined a batch";
  // Three ar requests queue behind a speculative one, which holds the worker alone, so they
  // start together and meet in every forward and draw (every forward of a loop's request is
  // a batch, of one when alone: requests arriving one by one on a busy machine would not
  // meet, and the mean would say nothing). On a loaded machine the speculative request can
  // end before all three are queued (CI saw 6240 calls in 4160 batches): such a round proves
  // nothing, so it is run again, and only a round whose three requests all queued behind the
  // blocker is judged.
  const auto wait_for = [&](const char* metric, double at_least, const std::atomic<bool>& done) {
    for (int i = 0; i < 3000 && !done && (*server)->MetricSum(metric, {}) < at_least; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return (*server)->MetricSum(metric, {}) >= at_least && !done;
  };
  bool judged = false;
  for (int round = 0; round < 5 && !judged; ++round) {
    const double batches_before = (*server)->MetricSum("mulo_batch_size_count", {});
    const double sizes_before = (*server)->MetricSum("mulo_batch_size_sum", {});
    std::atomic<bool> blocker_done{false};
    std::thread blocker([&] {
      run(50 + round, /*speculative=*/true);
      blocker_done = true;
    });
    const bool blocking = wait_for("mulo_requests_running", 1, blocker_done);
    for (int i = 0; i < 3; ++i) threads.emplace_back(run, 60 + i, /*speculative=*/false);
    const bool all_queued = blocking && wait_for("mulo_queue_depth", 3, blocker_done);
    blocker.join();
    for (auto& t : threads) t.join();
    threads.clear();
    if (!all_queued) continue;
    judged = true;
    const double batches = (*server)->MetricSum("mulo_batch_size_count", {}) - batches_before;
    const double sizes = (*server)->MetricSum("mulo_batch_size_sum", {}) - sizes_before;
    EXPECT_GT(batches, 0);
    EXPECT_GT(sizes, 2.5 * batches)
        << "the three ar requests queued together but did not meet in (nearly) every batch";
  }
  EXPECT_TRUE(judged) << "in five rounds the speculative request never outlasted the queueing "
                         "of three ar requests";
}

TEST(ServerIntegrationTest, QueueOverflowIsUnavailableAndTheRestComplete) {
  auto server = ServerProcess::Start(
      {"--model_repository=tests/data/repository", "--workers=1", "--max_queue=1"});
  ASSERT_TRUE(server.ok()) << server.status();
  constexpr int kRequests = 6;
  std::vector<grpc::StatusCode> codes(kRequests);
  std::vector<std::thread> threads;
  for (int i = 0; i < kRequests; ++i) {
    threads.emplace_back([&, i] {
      auto stub = (*server)->NewStub();
      codes[i] = RunStream(*stub, ValidRequest(10 + i)).status.error_code();
    });
  }
  for (auto& t : threads) t.join();
  int ok = 0, unavailable = 0;
  for (auto code : codes) {
    ok += code == grpc::StatusCode::OK;
    unavailable += code == grpc::StatusCode::UNAVAILABLE;
  }
  EXPECT_EQ(ok + unavailable, kRequests);
  // At least the first admitted request completes; a second completes only when the worker
  // had taken the first off the queue before the burst filled it again (a race that left
  // exactly one in one of four suite runs in session 10).
  EXPECT_GE(ok, 1);
  EXPECT_GE(unavailable, 1);  // the excess is refused at once
  EXPECT_EQ((*server)->MetricSum("mulo_requests_total", {"code=\"UNAVAILABLE\""}), unavailable);
}

TEST(ServerIntegrationTest, SigtermDrainsTheStreamRefusesNewWorkAndExitsZero) {
  auto server = ServerProcess::Start(kRepository);
  ASSERT_TRUE(server.ok()) << server.status();
  std::atomic<bool> first_row{false};
  StreamResult in_flight;
  std::thread stream([&] {
    auto stub = (*server)->NewStub();
    in_flight = RunStream(*stub, ValidRequest(), 60, [&](const v1::RowsEvent&) { first_row = true; });
  });
  while (!first_row) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  (*server)->Signal(SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto stub = (*server)->NewStub();
  StreamResult refused = RunStream(*stub, ValidRequest(5), 5);
  stream.join();
  EXPECT_TRUE(in_flight.status.ok()) << in_flight.status.error_message();
  EXPECT_TRUE(in_flight.image.has_value());
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << refused.status.error_message();
  EXPECT_EQ((*server)->Wait(30), 0) << (*server)->Log();
}

}  // namespace
}  // namespace mulo::testing
