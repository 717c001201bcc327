// The command lines of the tools (and linattn-bench), parsed by CLI11: --help is generated from the
// options, and an error names the flag and what it expected, as "linattn-eval: error: --batch '0'
// is not a whole number in [1, 65536] (see linattn-eval --help)".
#pragma once

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace linattn::cli {

// A whole number in [lo, hi]; refuses "x", "1.5", "12abc" and numbers out of range.
inline CLI::Validator whole_number(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (!text.empty() && *end == '\0' && errno == 0 && v >= lo && v <= hi) return "";
        return "'" + text + "' is not a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
      },
      "");
}

// A finite number.
inline CLI::Validator finite_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(text.c_str(), &end);
        if (!text.empty() && *end == '\0' && errno == 0 && std::isfinite(v)) return "";
        return "'" + text + "' is not a number";
      },
      "");
}

// One of `choices`: "--metric 'x' is not one of val_loss, bpb, recall_accuracy".
// --tokenizer: bytes, gpt2, or the path of a Hugging Face tokenizer.json (or of its folder).
inline CLI::Validator tokenizer_name() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text == "bytes" || text == "gpt2" || linattn::data::names_tokenizer_file(text)) return "";
        return "'" + text + "' is not bytes, gpt2 or the path of a tokenizer.json";
      },
      "");
}

inline CLI::Validator one_of(std::vector<std::string> choices) {
  return CLI::Validator(
      [choices](std::string& text) -> std::string {
        std::string list;
        for (const std::string& c : choices) {
          if (c == text) return "";
          list += (list.empty() ? "" : ", ") + c;
        }
        return "'" + text + "' is not one of " + list;
      },
      "");
}

// "1 run", "3 runs": a count and its noun, in the plural unless it is one.
inline std::string counted(long long n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// Prints "TOOL: error: WHAT (see TOOL --help)" and exits with `status`: a command line the tool
// cannot run. `tool` is the program's name ("linattn-data prepare" for a subcommand).
[[noreturn]] inline void usage_error(const std::string& tool, const std::string& what, int status) {
  std::fprintf(stderr, "%s: error: %s (see %s --help)\n", tool.c_str(), what.c_str(), tool.c_str());
  std::exit(status);
}

namespace detail {

// The option `name` ("--out", "CKPT.h5") of the app or of one of its subcommands; nullptr if none.
inline const CLI::Option* find_option(const CLI::App& app, const std::string& name) {
  if (const CLI::Option* o = app.get_option_no_throw(name)) return o;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (const CLI::Option* o = find_option(*sub, name)) return o;
  return nullptr;
}

// Every option of the app and of its subcommands.
inline std::vector<const CLI::Option*> all_options(const CLI::App& app) {
  std::vector<const CLI::Option*> out = app.get_options();
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    const std::vector<const CLI::Option*> more = all_options(*sub);
    out.insert(out.end(), more.begin(), more.end());
  }
  return out;
}

// CLI11's message in our words: "--batch: '0' is not ..." (our validators) loses its colon, a
// missing value says what to give, and CLI11's own wording stays for the rest.
inline std::string message(const CLI::App& app, const CLI::ParseError& e) {
  const std::string what = e.what();
  const size_t colon = what.find(": ");
  if (colon == std::string::npos) return what;
  const std::string name = what.substr(0, colon), rest = what.substr(colon + 2);
  const CLI::Option* option = find_option(app, name);
  if (!option) return what;
  if (dynamic_cast<const CLI::ValidationError*>(&e) && rest.rfind("'", 0) == 0) return name + " " + rest;
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) && rest.find(" missing") != std::string::npos)
    return name + " needs a value: " + name + " " + option->get_type_name();
  return what;
}

}  // namespace detail

namespace detail {

// `text` in lines of at most `width` characters (a longer word stays whole).
inline std::string wrapped(const std::string& text, size_t width) {
  std::string out, line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  return out + line;
}

// The options' help in a column of 30 characters, their descriptions wrapped to 100 in all;
// positionals without CLI11's TEXT after their name.
inline void style_options(CLI::App& app) {
  app.get_formatter()->column_width(30);
  for (CLI::Option* option : app.get_options()) {
    option->description(wrapped(option->get_description(), 70));
    if (option->get_positional()) option->type_name("");
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) style_options(*sub);
}

}  // namespace detail

// Parses argv into `app`. --help prints the generated help to stdout and exits 0. A wrong command
// line exits with `status` after usage_error's message: an unknown option, command or a surplus
// argument ("unknown option '--bogus'", "unexpected argument 'b.h5'"), a flag without its value ("--out
// needs a value: --out DIR"; a value that is itself one of the tool's options counts as missing),
// or a value its validator refuses.
inline void parse(CLI::App& app, int argc, const char* const* argv, int status) {
  detail::style_options(app);
  if (!app.get_description().empty()) app.description(app.get_description() + "\n");  // a line before "Usage:"
  app.allow_extras();
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) sub->allow_extras();
  // Messages name the subcommand too: "linattn-data prepare: error: ...".
  auto tool = [&app] {
    const std::vector<CLI::App*> subs = app.get_subcommands();
    return app.get_name() + (subs.empty() ? "" : " " + subs.front()->get_name());
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    std::exit(0);
  } catch (const CLI::ParseError& e) {
    usage_error(tool(), detail::message(app, e), status);
  }
  for (const CLI::Option* option : detail::all_options(app))
    for (const std::string& value : option->results())
      if (!option->get_positional() && value.rfind("-", 0) == 0 && detail::find_option(app, value))
        usage_error(tool(), option->get_name() + " needs a value: " + option->get_name() + " " +
                                option->get_type_name() + " (it is followed by the option " + value + ")",
                    status);
  for (const std::string& extra : app.remaining(true)) {
    if (extra.rfind("-", 0) == 0) usage_error(tool(), "unknown option '" + extra + "'", status);
    const std::vector<CLI::App*> commands = app.get_subcommands([](CLI::App*) { return true; });
    if (commands.empty() || !app.get_subcommands().empty())
      usage_error(tool(), "unexpected argument '" + extra + "'", status);
    std::string names;
    for (const CLI::App* c : commands) names += (names.empty() ? "" : ", ") + c->get_name();
    usage_error(tool(), "unknown command '" + extra + "' (" + names + ")", status);
  }
}

}  // namespace linattn::cli
