// A short sample of the model's text for the training log (train.sample_every), as llm.c prints.
#pragma once

#include <cstdint>
#include <string>

#include "data/dataset.h"
#include "data/tokenizer.h"
#include "layers/model.h"
#include "train/config.h"

namespace linattn {

// The prompt continued by up to `tokens` tokens drawn at temperature 0.8 from a generator seeded with
// `seed` (a sample starts at a document start, as the training documents do; it ends early at an
// end-of-text token). Returned as one line of well-formed UTF-8: newlines and tabs shown as "\n" and
// "\t", other control characters as "\xNN", bytes that are not UTF-8 as U+FFFD.
std::string training_sample(const Model& model, const data::Tokenizer& tokenizer, const std::string& prompt,
                            int64_t tokens, uint64_t seed);

// The trainer's log line: "sample step N | TEXT" with train.sample_prompt, sample_tokens and seed, in
// the tokenizer named `tokenizer` (bytes, gpt2 or a tokenizer.json); a problem (GPT-2's files not found,
// a prompt it cannot encode) becomes a warning line instead, so that a sample never stops a run.
std::string training_sample_line(const Model& model, const std::string& tokenizer, const TrainConfig& t,
                                 int64_t step);
// The same in the tokenizer that made `data` (data_tokenizer in data/dataset.h; read once and kept).
std::string training_sample_line(const Model& model, const data::Dataset& data, const TrainConfig& t, int64_t step);

}  // namespace linattn
