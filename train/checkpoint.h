// Checkpoints: one HDF5 file per checkpoint holding every parameter under its HF/fla name, the
// AdamW moments, the training position and the data sampler's state, and the resolved config.
// The schema is docs/checkpoint-format.md. Writes are crash-safe (temporary file, fsync, rename).
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"
#include "layers/model.h"
#include "train/config.h"
#include "train/optimizer.h"

namespace linattn {

constexpr int64_t kCheckpointFormatVersion = 1;

// Where a run is: everything besides the weights and moments that an exact resume needs.
struct TrainState {
  int64_t step = 0;          // optimizer steps taken (including skipped ones)
  int64_t tokens = 0;        // training tokens consumed
  double elapsed = 0;        // seconds of training so far (for max_time)
  double best_val_loss = 0;  // NaN when not evaluated yet
  // The steps since the last logged one (train.log_every), whose mean loss the next log line shows:
  // kept so that a resumed run logs the loss the uninterrupted run did.
  double log_loss_sum = 0;     // their losses, summed
  int64_t log_steps = 0;       // how many (skipped steps not counted)
  double log_seconds = 0;      // their time (for tokens/s)
  data::SamplerState sampler;
};

// Writes the checkpoint to `path` through a temporary file in the same folder: the old file at
// `path` stays intact until the new one is complete and on disk.
void save_checkpoint(const std::string& path, const Config& config, const Model& model, const AdamW* optimizer,
                     const TrainState& state);

// The config text stored in a checkpoint (to rebuild its model), after checking that `path` is a
// linattn checkpoint of a format this build reads.
std::string checkpoint_config_text(const std::string& path);

// A saved config text with the defaults of the build that wrote it made explicit: a model section
// without gated_deltanet_decay predates the key, when Gated DeltaNet's decay was logsigmoid; a data
// section without document_boundaries predates that key, when every window was one sequence (cross).
std::string upgrade_saved_config(const std::string& config_text);

// Before resuming from `checkpoint`: the settings whose default changed since the checkpoint was
// written (model.gated_deltanet_decay, data.document_boundaries) take the checkpoint's value when
// `config` does not set them, so that a run written before the change resumes unchanged.
void keep_checkpoint_defaults(Config& config, const std::string& checkpoint);

// Reads a checkpoint into the model (and optimizer and state, when given). The model built from
// `config` must match the checkpoint's: otherwise the error names the differing model fields.
// Differing training settings are allowed and listed in `warnings`.
void load_checkpoint(const std::string& path, const Config& config, Model& model, AdamW* optimizer, TrainState* state,
                     std::vector<std::string>* warnings = nullptr);

// RUN_DIR/checkpoints/step-NNNNNNNN.h5
std::string checkpoint_path(const std::string& out_dir, int64_t step);
// The newest checkpoint in RUN_DIR/checkpoints, or "" when there is none.
std::string latest_checkpoint(const std::string& out_dir);
// What is wrong with the checkpoint at `path` (not a checkpoint, truncated, a checksum that does not
// match), or "" when it reads back intact.
std::string checkpoint_problem(const std::string& path);
// The newest checkpoint in RUN_DIR/checkpoints that reads back intact, or "" when there is none.
// Each newer one passed over is added to `skipped` as "PATH: what is wrong with it".
std::string latest_verified_checkpoint(const std::string& out_dir, std::vector<std::string>* skipped);
// A tool's checkpoint argument (linattn-eval, -generate, -export): a run folder, one holding
// checkpoints/, stands for its newest intact checkpoint, which is named on stderr with any newer
// damaged one passed over; any other path is returned as given. A run folder without an intact
// checkpoint is an error that says so.
std::string checkpoint_argument(const std::string& path, const std::string& tool);
// Deletes all but the newest `keep` checkpoints of the run.
void prune_checkpoints(const std::string& out_dir, int64_t keep);

}  // namespace linattn
