// The server's edge, without a server: every method of the wire contract maps to a registry
// entry, method and sampling fields reach the engine options as sent (unset ones take the
// engine's defaults, the CFG scale the family's), and the engine's checks come back as the
// request's error.
#include "server/request_validation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/decode/method_registry.h"
#include "engine/decode/option_text.h"
#include "mulo/v1/method_names.h"

namespace mulo::server {
namespace {

class RequestValidationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = ModelRepository::Load("tests/data/repository", engine::LoadOptions());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    repository_ = std::move(loaded).value().release();
  }
  static void TearDownTestSuite() { delete repository_; }

  static v1::GenerateRequest Valid() {
    v1::GenerateRequest request;
    request.set_model("tiny");
    request.set_prompt("a small red circle in the top left");
    return request;
  }

  static ModelRepository* repository_;
};

ModelRepository* RequestValidationTest::repository_ = nullptr;

TEST_F(RequestValidationTest, EveryMethodOfTheApiMapsToARegistryEntry) {
  const auto* oneof = v1::GenerateRequest::descriptor()->FindOneofByName("method");
  ASSERT_NE(oneof, nullptr);
  ASSERT_EQ(oneof->field_count(), static_cast<int>(engine::Methods().size()));
  for (int i = 0; i < oneof->field_count(); ++i) {
    v1::GenerateRequest request = Valid();
    request.GetReflection()->MutableMessage(&request, oneof->field(i));
    auto validated = ValidateRequest(request, *repository_);
    const engine::MethodEntry& entry = engine::Methods()[i];  // same order as the proto
    if (entry.resolve) {  // auto: the method it chooses (the test family has no table: ar)
      ASSERT_TRUE(validated.ok()) << oneof->field(i)->name() << ": " << validated.status();
      EXPECT_EQ(validated->plan.method, "ar");
      EXPECT_EQ(validated->plan.decoder->name(), "ar");
      EXPECT_NE(validated->plan.method_config.chosen_by.find("no cpu calibration"),
                std::string::npos);
    } else if (entry.implemented) {
      ASSERT_TRUE(validated.ok()) << oneof->field(i)->name() << ": " << validated.status();
      EXPECT_EQ(validated->plan.method, entry.name);
      EXPECT_EQ(validated->plan.decoder->name(), entry.name);
    } else {
      EXPECT_EQ(validated.status().code(), absl::StatusCode::kUnimplemented)
          << oneof->field(i)->name();
      EXPECT_NE(validated.status().message().find("'" + entry.name + "'"), std::string::npos);
    }
  }
  // No method set is AR.
  auto plain = ValidateRequest(Valid(), *repository_);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->plan.method, "ar");
}

using google::protobuf::FieldDescriptor;

// The leaf fields of a method message, nested ones as "tree.top_k".
void Leaves(const google::protobuf::Descriptor& message, const std::string& prefix,
            std::vector<std::pair<std::string, const FieldDescriptor*>>* out) {
  for (int i = 0; i < message.field_count(); ++i) {
    const FieldDescriptor* field = message.field(i);
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      Leaves(*field->message_type(), prefix + field->name() + ".", out);
    } else {
      out->emplace_back(prefix + field->name(), field);
    }
  }
}

engine::OptionKind KindOf(const FieldDescriptor& field) {
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT: return engine::OptionKind::kNumber;
    case FieldDescriptor::CPPTYPE_BOOL: return engine::OptionKind::kBoolean;
    case FieldDescriptor::CPPTYPE_ENUM: return engine::OptionKind::kChoice;
    default: return engine::OptionKind::kInteger;
  }
}

// Sets `path` ("tree.top_k") in the method message `params` to `value` (an enum's number).
void SetField(google::protobuf::Message* params, const std::string& path, double value) {
  const size_t dot = path.find('.');
  const auto* reflection = params->GetReflection();
  if (dot != std::string::npos) {
    const auto* nested = params->GetDescriptor()->FindFieldByName(path.substr(0, dot));
    SetField(reflection->MutableMessage(params, nested), path.substr(dot + 1), value);
    return;
  }
  const FieldDescriptor* field = params->GetDescriptor()->FindFieldByName(path);
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_UINT32:
      reflection->SetUInt32(params, field, static_cast<uint32_t>(value));
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE: reflection->SetDouble(params, field, value); break;
    case FieldDescriptor::CPPTYPE_BOOL: reflection->SetBool(params, field, value != 0); break;
    case FieldDescriptor::CPPTYPE_ENUM:
      reflection->SetEnumValue(params, field, static_cast<int>(value));
      break;
    default: FAIL() << path << ": a field type the test does not set";
  }
}

// The proto is the one list of option names: every field of every method's message is an
// option of the method's spec with the matching kind (an enum's values, less UNSPECIFIED, are
// the option's choices), and every option is a field.
TEST_F(RequestValidationTest, EveryFieldOfEveryMethodMessageIsAnOptionOfItsSpec) {
  const auto& oneof = v1::MethodOneof();
  for (int i = 0; i < oneof.field_count(); ++i) {
    const std::string name = v1::ApiMethodName(*oneof.field(i));
    const engine::MethodEntry* method = engine::FindMethod(name);
    ASSERT_NE(method, nullptr) << name;
    std::vector<std::pair<std::string, const FieldDescriptor*>> leaves;
    Leaves(*oneof.field(i)->message_type(), "", &leaves);
    for (const auto& [path, field] : leaves) {
      const engine::OptionSpec* option = engine::FindOption(method->options, path);
      ASSERT_NE(option, nullptr) << name << "." << path << " has no option in the spec";
      EXPECT_EQ(option->kind, KindOf(*field)) << name << "." << path;
      if (option->kind == engine::OptionKind::kChoice) {
        std::vector<std::string> values;
        for (int v = 0; v < field->enum_type()->value_count(); ++v) {
          if (field->enum_type()->value(v)->number() != 0) {
            values.push_back(field->enum_type()->value(v)->name());
          }
        }
        std::vector<std::string> choices = option->choices;
        std::sort(values.begin(), values.end());
        std::sort(choices.begin(), choices.end());
        EXPECT_EQ(choices, values) << name << "." << path;
      }
    }
    EXPECT_EQ(method->options.size(), leaves.size()) << name << ": an option without a field";
  }
}

// Every bound of every option, sent over the wire just outside it (and NaN for numbers, an
// undeclared number for enums), is refused as INVALID_ARGUMENT naming "<method>.<option>".
TEST_F(RequestValidationTest, EveryOptionBoundIsEnforcedNamingTheField) {
  const auto& oneof = v1::MethodOneof();
  int refused = 0;
  for (int i = 0; i < oneof.field_count(); ++i) {
    const engine::MethodEntry* method = engine::FindMethod(v1::ApiMethodName(*oneof.field(i)));
    ASSERT_NE(method, nullptr);
    for (const engine::OptionSpec& option : method->options) {
      std::vector<double> outside;
      switch (option.kind) {
        case engine::OptionKind::kChoice: outside = {99}; break;
        case engine::OptionKind::kBoolean:
          if (option.max < 1) outside = {1};
          break;
        case engine::OptionKind::kInteger:
          if (std::isfinite(option.max)) outside.push_back(option.max + 1);
          if (option.min > 0) outside.push_back(option.min - 1);
          break;
        case engine::OptionKind::kNumber:
          outside.push_back(std::nan(""));
          if (std::isfinite(option.max)) outside.push_back(option.max * 2 + 1);
          if (option.min > 0) outside.push_back(0);
          if (option.min == 0) outside.push_back(-1);
          break;
      }
      for (double value : outside) {
        v1::GenerateRequest request = Valid();
        SetField(request.GetReflection()->MutableMessage(&request, oneof.field(i)), option.name,
                 value);
        auto validated = ValidateRequest(request, *repository_);
        const std::string field = method->name + "." + option.name;
        ASSERT_EQ(validated.status().code(), absl::StatusCode::kInvalidArgument)
            << field << " = " << value;
        EXPECT_EQ(validated.status().message().substr(0, field.size() + 1), field + ":")
            << validated.status().message();
        ++refused;
      }
    }
  }
  EXPECT_GE(refused, 60);  // every method with options contributes
}

TEST_F(RequestValidationTest, OptionsReachTheEngineAsSentAndUnsetOnesKeepItsDefaults) {
  v1::GenerateRequest request = Valid();
  auto* m = request.mutable_mulo();
  m->set_tau(0.25);
  m->set_k(7);
  m->set_radius(2);
  m->set_rejection(v1::MuloParams::RASTER);
  m->set_draft_prefix(v1::MuloParams::KEEP_DRAFTED);
  request.mutable_sampling()->set_temperature(0);
  request.mutable_sampling()->set_seed(99);
  auto validated = ValidateRequest(request, *repository_);
  ASSERT_TRUE(validated.ok()) << validated.status();
  // Unset fields take the family's calibrated defaults (family.json method_defaults).
  const engine::MuloOptions defaults =
      engine::DefaultMethodConfig("mulo", validated->engine->models())->mulo;
  const engine::MuloOptions& got = validated->plan.method_config.mulo;
  EXPECT_EQ(got.tau, 0.25);
  EXPECT_EQ(got.pooling.k, 7);
  EXPECT_EQ(got.radius, 2);
  EXPECT_EQ(got.rejection, engine::Rejection::kRaster);
  EXPECT_EQ(got.prefix, engine::DraftPrefix::kKeepDrafted);
  EXPECT_EQ(got.pooling.kind, defaults.pooling.kind);    // unset
  EXPECT_EQ(got.pooling.delta, defaults.pooling.delta);  // unset
  EXPECT_EQ(got.draft_rows, defaults.draft_rows);        // unset
  EXPECT_EQ(got.draft_cfg_scale, defaults.draft_cfg_scale);  // unset
  const engine::SamplingParams sampling_defaults;
  EXPECT_EQ(validated->plan.sampling.temperature, 0.0);
  EXPECT_EQ(validated->plan.sampling.seed, 99u);
  EXPECT_EQ(validated->plan.sampling.top_p, sampling_defaults.top_p);
  EXPECT_EQ(validated->plan.sampling.cfg_scale, validated->engine->models().default_cfg_scale);

  v1::GenerateRequest speculative = Valid();
  speculative.mutable_speculative()->set_gamma(6);
  auto spec = ValidateRequest(speculative, *repository_);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->plan.method_config.speculative.gamma, 6);
  speculative.mutable_speculative()->clear_gamma();
  EXPECT_EQ(ValidateRequest(speculative, *repository_)->plan.method_config.speculative.gamma,
            engine::SpeculativeOptions().gamma);
  auto unset = ValidateRequest(Valid(), *repository_);
  EXPECT_EQ(unset->plan.sampling.temperature, sampling_defaults.temperature);
}

TEST_F(RequestValidationTest, ThePaperPresetAndTheNewMuloFields) {
  v1::GenerateRequest request = Valid();
  auto* m = request.mutable_mulo();
  m->set_preset(v1::MuloParams::PAPER);
  auto paper = ValidateRequest(request, *repository_);
  ASSERT_TRUE(paper.ok()) << paper.status();
  engine::MethodConfig paper_config;
  paper_config.mulo = engine::PaperMuloOptions();
  const engine::MethodEntry& mulo = *engine::FindMethod("mulo");
  EXPECT_EQ(engine::OptionsJson(mulo, paper->plan.method_config),
            engine::OptionsJson(mulo, paper_config));
  m->set_pooling(v1::MuloParams::MULTIPLICATIVE);
  m->set_lambda(3);
  m->set_draft_prefix(v1::MuloParams::PATCH);
  m->set_draft_cfg_scale(2);
  m->set_draft_temperature(0.5);
  m->set_resample(v1::MuloParams::PARALLEL);
  m->set_parallel_radius(0);
  auto set = ValidateRequest(request, *repository_);
  ASSERT_TRUE(set.ok()) << set.status();
  const engine::MuloOptions& got = set->plan.method_config.mulo;
  EXPECT_EQ(got.pooling.kind, engine::Pooling::kMultiplicative);
  EXPECT_EQ(got.pooling.lambda, 3);
  EXPECT_EQ(got.prefix, engine::DraftPrefix::kPatch);
  EXPECT_EQ(got.draft_cfg_scale, 2.0);
  EXPECT_EQ(got.draft_temperature, 0.5);
  EXPECT_EQ(got.resample, engine::ResampleOrder::kParallel);
  EXPECT_EQ(got.parallel_radius, 0);
  EXPECT_EQ(got.tau, engine::PaperMuloOptions().tau);  // the preset's
  m->set_pooling(v1::MuloParams::NO_POOLING);
  m->set_draft_prefix(v1::MuloParams::OWN);
  auto none = ValidateRequest(request, *repository_);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->plan.method_config.mulo.pooling.kind, engine::Pooling::kNone);
  EXPECT_EQ(none->plan.method_config.mulo.prefix, engine::DraftPrefix::kOwn);
  // Unknown enum numbers and out-of-range values are refused naming the field.
  auto field_of = [&](const v1::GenerateRequest& r) {
    auto v = ValidateRequest(r, *repository_);
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(v.status().message());
    return message.substr(0, message.find(':'));
  };
  v1::GenerateRequest bad = request;
  bad.mutable_mulo()->set_preset(static_cast<v1::MuloParams::Preset>(7));
  EXPECT_EQ(field_of(bad), "mulo.preset");
  bad = request;
  bad.mutable_mulo()->set_pooling(static_cast<v1::MuloParams::Pooling>(7));
  EXPECT_EQ(field_of(bad), "mulo.pooling");
  bad = request;
  bad.mutable_mulo()->set_lambda(0.5);
  EXPECT_EQ(field_of(bad), "mulo.lambda");
  bad = request;
  bad.mutable_mulo()->set_draft_cfg_scale(-1);
  EXPECT_EQ(field_of(bad), "mulo.draft_cfg_scale");
  bad = request;
  bad.mutable_mulo()->set_resample(static_cast<v1::MuloParams::ResampleOrder>(9));
  EXPECT_EQ(field_of(bad), "mulo.resample");
  bad = request;
  bad.mutable_mulo()->set_draft_temperature(1000);
  EXPECT_EQ(field_of(bad), "mulo.draft_temperature");
}

TEST_F(RequestValidationTest, EngineChecksBecomeTheRequestsErrorNamingTheField) {
  const std::vector<std::pair<std::string, std::function<void(v1::GenerateRequest*)>>> bad = {
      {"sampling.temperature", [](auto* r) { r->mutable_sampling()->set_temperature(-1); }},
      {"sampling.top_k", [](auto* r) { r->mutable_sampling()->set_top_k(1u << 30); }},
      {"mulo.tau", [](auto* r) { r->mutable_mulo()->set_tau(INFINITY); }},
      {"mulo.rejection", [](auto* r) {
         r->mutable_mulo()->set_rejection(static_cast<v1::MuloParams::Rejection>(7));
       }},
      {"speculative.gamma", [](auto* r) { r->mutable_speculative()->set_gamma(65); }},
  };
  for (const auto& [field, mutate] : bad) {
    v1::GenerateRequest request = Valid();
    mutate(&request);
    auto validated = ValidateRequest(request, *repository_);
    EXPECT_EQ(validated.status().code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_EQ(validated.status().message().rfind(field + ":", 0), 0u) << validated.status();
  }
}

TEST_F(RequestValidationTest, ATextStageDecodesWithItsLosslessMethodsOnly) {
  // A stage family (Tar's MLLM: a target and nothing else) runs ar, sjd, gsd, zipar, mc_sjd,
  // sjd_pac and auto; its text may be decoded only by the lossless ones (the docs' list),
  // not by relaxed gsd or zipar, nor auto.
  engine::ModelSet stage;
  stage.name = "stage";
  stage.target = repository_->Find("tiny")->models().target;
  const std::vector<std::string> methods = engine::TextStageMethods(stage);
  // Exactly the registry's implemented methods that need nothing beyond the target and are
  // lossless at the stage's defaults (derived, so that a new method needs no line here).
  std::vector<std::string> lossless;
  for (const engine::MethodEntry& entry : engine::Methods()) {
    if (!entry.make || !entry.needs.empty() || !entry.lossless) continue;
    auto config = engine::DefaultMethodConfig(entry.name, stage);
    ASSERT_TRUE(config.ok()) << entry.name;
    if (entry.lossless(*config)) lossless.push_back(entry.name);
  }
  EXPECT_EQ(methods, lossless);
  for (const std::string name : {"ar", "sjd", "mc_sjd", "sjd_pac"}) {
    EXPECT_EQ(std::count(methods.begin(), methods.end(), name), 1) << name;
  }
  for (const std::string name : {"gsd", "zipar", "auto", "eagle", "speculative"}) {
    EXPECT_EQ(std::count(methods.begin(), methods.end(), name), 0) << name;
  }
}

}  // namespace
}  // namespace mulo::server
