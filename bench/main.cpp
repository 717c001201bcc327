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
  CLI::App app("Prints performance figures (float32, " + std::to_string(omp_get_max_threads()) +
                   " threads; set OMP_NUM_THREADS to change).",
               "linattn-bench");
  app.require_subcommand(0, 1);
  std::vector<std::pair<CLI::App*, std::function<int()>>> runs;
  for (const Command& c : commands()) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    runs.emplace_back(sub, c.setup(*sub));
  }
  linattn::cli::parse(app, argc, argv, 1);
  for (const auto& [sub, run] : runs) {
    if (!sub->parsed()) continue;
    try {
      return run();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "linattn-bench %s: error: %s\n", sub->get_name().c_str(), e.what());
      return 1;
    }
  }
  std::fputs(app.help().c_str(), stderr);  // no command
  return 1;
}
