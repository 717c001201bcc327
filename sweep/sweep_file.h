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

struct SweepRun {
  std::string name;                 // its folder under Sweep::out_dir
  std::string entry;                // its runs entry: the entry's name, else its values ("" without runs)
  std::vector<Override> overrides;  // what sets it apart: its runs entry, then its grid point
  std::vector<Override> point;      // its grid point
  std::string group;                // runs with equal groups are compared (Sweep::compare)
};

struct Sweep {
  std::string path;                 // the sweep file
  std::string base;                 // the base config, as found from the working directory
  std::string out_dir;
  std::vector<std::string> launcher;  // e.g. {"mpirun", "-np", "2"}; empty: none
  std::vector<Override> common;       // `set:`, given to every run
  std::vector<std::string> keys;      // every key a run overrides, in order of first appearance
  std::vector<std::string> grid_keys;
  std::string compare;  // the key the runs of a group differ in, or "runs" (the runs entries)
  std::vector<SweepRun> runs;
  // Every --set item of run `i`: common ones first.
  std::vector<std::string> set_items(size_t i) const;
  std::string run_dir(size_t i) const;
  // `message` with each "--set ITEM" of run `i` replaced by the sweep file's place of the item.
  std::string in_sweep_terms(std::string message, size_t i) const;
};

// Reads and expands the sweep file, and parses the config of every run (base + overrides): an
// unknown key or a bad value throws linattn::Error at the sweep file's LINE:COL.
Sweep load_sweep(const std::string& path);

// `text` as a folder name: runs of characters other than letters, digits, '.', '-', '_' and '='
// become one '_', and none is left at the ends or beside a '-' or '='.
std::string folder_name(const std::string& text);

}  // namespace linattn
