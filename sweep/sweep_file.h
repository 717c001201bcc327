// A sweep file: a base config and the runs made from it by overrides in --set syntax (README.md,
// "linattn-sweep"). Loading it checks every run's config before anything runs.
#pragma once

#include <string>
#include <vector>

namespace linattn {

// One override: "model.hidden_size" = "128", and where the sweep file gives it.
struct Override {
  std::string key;
  std::string value;  // YAML in flow style ("[gla, attention]"), as --set reads it
  std::string where;  // "SWEEP.yaml:LINE:COL"
  std::string item() const { return key + "=" + value; }
};

// A run is one configuration (a runs entry at a grid point) trained at one value of the tuned keys
// with one seed; without `tune` and `seeds` every configuration is one run.
struct SweepRun {
  std::string name;                 // its folder under Sweep::out_dir
  std::string entry;                // its runs entry: the entry's name, else its values ("" without runs)
  std::vector<Override> overrides;  // what sets it apart: its runs entry, grid point, tuned values, seed
  std::vector<Override> point;      // its grid point
  std::string group;                // configurations with equal groups are compared (Sweep::compare)
  std::string config;               // its configuration's name: the run's name without tuned values and seed
  std::string tuned;                // its tuned values ("train.lr=1.0e-3"; "" without tune)
  std::string seed;                 // its train.seed ("" without seeds)
};

struct Sweep {
  std::string path;                 // the sweep file
  std::string base;                 // the base config, as found from the working directory
  std::string out_dir;
  std::vector<std::string> launcher;  // e.g. {"mpirun", "-np", "2"}; empty: none
  std::vector<Override> common;       // `set:`, given to every run
  std::vector<Override> command_line; // the command line's --set items, given to every run last (they win)
  std::vector<std::string> keys;      // every key a run overrides, in order of first appearance
  std::vector<std::string> grid_keys;
  std::string compare;  // the key the runs of a group differ in, or "runs" (the runs entries)
  std::vector<std::string> tune_keys;  // `tune:`: each configuration trains at every combination
  std::vector<std::string> seeds;      // `seeds:`: each of those trains once per train.seed
  std::vector<SweepRun> runs;
  // Every --set item of run `i`: common ones first, the command line's last.
  std::vector<std::string> set_items(size_t i) const;
  std::string run_dir(size_t i) const;
  // `message` with each "--set ITEM" of run `i` replaced by the sweep file's place of the item.
  std::string in_sweep_terms(std::string message, size_t i) const;
};

// Reads and expands the sweep file, and parses the config of every run (base + overrides +
// `command_line`, items KEY=VALUE given to every run after its own): an unknown key or a bad value
// throws linattn::Error at the sweep file's LINE:COL, or naming the command line's --set item.
Sweep load_sweep(const std::string& path, const std::vector<std::string>& command_line = {});

// `text` as a folder name: runs of characters other than letters, digits, '.', '-', '_' and '='
// become one '_', and none is left at the ends or beside a '-' or '='.
std::string folder_name(const std::string& text);

}  // namespace linattn
