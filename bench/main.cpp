// linattn-bench: performance figures, one subcommand per area. `linattn-bench --help` lists them.
#include <omp.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

#include "bench/bench.h"

namespace linattn::bench {

static std::vector<Command>& commands() {
  static std::vector<Command> all;
  return all;
}

bool add_command(Command command) {
  commands().push_back(std::move(command));
  return true;
}

}  // namespace linattn::bench

int main(int argc, char** argv) {
  using namespace linattn::bench;
  auto usage = [] {
    std::printf("usage: linattn-bench COMMAND [options]\n\nPrints performance figures (float32, %d threads; set "
                "OMP_NUM_THREADS to change).\n\ncommands:\n",
                omp_get_max_threads());
    for (const Command& c : commands()) std::printf("  %-12s %s\n", c.name.c_str(), c.help.c_str());
  };
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage();
    return argc < 2 ? 1 : 0;
  }
  for (const Command& c : commands()) {
    if (c.name != argv[1]) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "linattn-bench %s: error: %s\n", argv[1], e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "linattn-bench: unknown command '%s'\n\n", argv[1]);
  usage();
  return 1;
}
