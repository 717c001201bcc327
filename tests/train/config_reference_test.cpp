// docs/config.md, the config reference, is what the key declarations print (config_reference_markdown):
// every section heading and table row, in order. On a difference the test prints a line diff;
// regenerate the tables with `build/linattn-train --config-reference`.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "train/config.h"
#include "train/config_keys.h"

namespace linattn {
namespace {

// The section headings ("**model**") and table rows of `text`.
std::vector<std::string> table_lines(std::istream& in) {
  static const std::regex heading(R"(^\*\*[a-z.\[\]]+\*\*.*)");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("|", 0) == 0 || std::regex_match(line, heading)) lines.push_back(line);
  return lines;
}

// docs/config.md, the config reference page (the tests run from the project root).
std::string reference_page() {
  std::ifstream in("docs/config.md");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The lines only in `a` ("- ") or only in `b` ("+ "), from a longest common subsequence.
std::string line_diff(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> lcs(n + 1, std::vector<size_t>(m + 1, 0));
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  std::string out;
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      ++i, ++j;
    } else if (j == m || (i < n && lcs[i + 1][j] >= lcs[i][j + 1])) {
      out += "- " + a[i++] + "\n";
    } else {
      out += "+ " + b[j++] + "\n";
    }
  }
  return out;
}

TEST(ConfigReference, DocsPageMatchesTheDeclarations) {
  std::istringstream page(reference_page()), generated(config_reference_markdown());
  const std::vector<std::string> have = table_lines(page), want = table_lines(generated);
  ASSERT_FALSE(have.empty()) << "docs/config.md has no tables (run from the project root)";
  EXPECT_EQ(have, want) << "docs/config.md (-) differs from the declarations in "
                           "train/config_keys.cpp (+); print the tables with linattn-train --config-reference:\n"
                        << line_diff(have, want);
}

// The diff names the lines that differ, so the failure message above can be acted on.
TEST(ConfigReference, DiffNamesTheLinesThatDiffer) {
  EXPECT_EQ(line_diff({"a", "b", "c"}, {"a", "x", "c", "d"}), "- b\n+ x\n+ d\n");
  EXPECT_EQ(line_diff({"a"}, {"a"}), "");
}

// Every key of a section is declared once; the reference's rows each start with a declared key.
template <class S>
void expect_unique(const char* path, const std::vector<ConfigKey<S>>& keys) {
  std::set<std::string> seen;
  for (const ConfigKey<S>& k : keys) {
    EXPECT_TRUE(seen.insert(k.name).second) << path << "." << k.name << " is declared twice";
    EXPECT_FALSE(k.doc.empty()) << path << "." << k.name << " has no doc";
  }
}

TEST(ConfigReference, EveryKeyDeclaredOnceWithADoc) {
  for_each_section([](const auto& section) { expect_unique(section.path, section.keys); });
  expect_unique("model.layers[i]", layer_keys());
  const std::string reference = config_reference_markdown();
  EXPECT_NE(reference.find("| `mqar.power_a` | 0.01 | number | "), std::string::npos) << reference;
  EXPECT_NE(reference.find("| `hidden_size` | 256 | integer in [1, 2^16] | model width |"), std::string::npos)
      << reference;
}

}  // namespace
}  // namespace linattn
