// linattn-train: placeholder until the trainer lands (issue 6); prints what it will do.
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::printf("usage: linattn-train CONFIG.yaml\n\nTrains the model CONFIG.yaml describes (not implemented yet).\n");
    return argc < 2 ? 1 : 0;
  }
  std::printf("linattn-train: the trainer is not built yet; it will train the model described by %s\n", argv[1]);
  return 0;
}
