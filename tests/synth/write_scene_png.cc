// write_scene_png ID SIZE OUT.png: renders held-out scene ID at SIZE pixels into OUT.png and
// prints its prompt and then its mismatched captions (attribute<TAB>caption), one a line.
// Run from the runfiles root (reads models/synth/heldout_prompts.jsonl).
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <cstdlib>
#include <iostream>

#include "tests/synth/test_util.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: write_scene_png ID SIZE OUT.png\n";
    return 2;
  }
  const auto entries = mulo::synth::testing::LoadHeldout();
  const size_t id = std::strtoul(argv[1], nullptr, 10);
  if (id >= entries.size()) {
    std::cerr << "no held-out scene " << id << "\n";
    return 2;
  }
  const cv::Mat rgb = mulo::synth::testing::RenderOrDie(entries[id].scene, std::atoi(argv[2]));
  cv::Mat bgr;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);  // imwrite expects BGR
  if (!cv::imwrite(argv[3], bgr)) {
    std::cerr << "cannot write " << argv[3] << "\n";
    return 1;
  }
  std::cout << entries[id].prompt << "\n";
  for (const auto& [attribute, caption] : entries[id].mismatched) {
    std::cout << attribute << "\t" << caption << "\n";
  }
  return 0;
}
