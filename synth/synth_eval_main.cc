// synth_eval: judges an image against a synth caption and prints the verdict.
//
//   bazel run //synth:synth_eval -- --caption="a red circle in the center on a blue background"
//       "$PWD/image.png"
//
// The image is read with cv::imread (any format it knows) and converted to RGB, the order
// SynthEval works in.
//
// Exit status: 0 when the verdict passes, 1 when it fails, 2 for a usage or caption error.
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "synth/synth_eval.h"

ABSL_FLAG(std::string, caption, "", "the caption the image should show");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Judges a synth image against its caption.\n"
      "usage: synth_eval --caption=\"...\" image.png");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string caption = absl::GetFlag(FLAGS_caption);
  if (args.size() != 2 || caption.empty()) {
    std::cerr << "usage: synth_eval --caption=\"...\" image.png\n";
    return 2;
  }
  const cv::Mat bgr = cv::imread(args[1], cv::IMREAD_COLOR);
  if (bgr.empty()) {
    std::cerr << "cannot read image " << args[1] << "\n";
    return 2;
  }
  cv::Mat rgb;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);  // SynthEval works in RGB order

  auto verdict = mulo::synth::SynthEval().Evaluate(caption, rgb);
  if (!verdict.ok()) {
    std::cerr << verdict.status().message() << "\n";
    return 2;
  }
  std::cout << verdict->ToString() << "\n";
  for (const auto& object : verdict->objects) {
    if (!object.found) continue;
    std::cout << "  " << mulo::synth::DescribeObject(object.claim) << ": " << object.area
              << " px, colour " << object.measured_color << ", best fit "
              << mulo::synth::SizeName(object.fit.best_size) << " "
              << mulo::synth::ShapeName(object.fit.best_shape) << " (IoU " << object.fit.best_iou
              << ")\n";
  }
  return verdict->pass ? 0 : 1;
}
