// The bound of a config key: which values it holds, at the edges, and what its messages say.
#include "core/config_key.h"

#include <gtest/gtest.h>

namespace linattn {
namespace {

struct Section {
  int64_t size = 4;
  double rate = 0.5;
  uint64_t seed = 7;
  std::string name = "x";
  enum class Mode { fast, slow } mode = Mode::slow;
};

TEST(ConfigBound, EdgesOpenClosedAndSpecial) {
  ConfigKey<Section> closed = config_key("size", &Section::size, "").in(1, 65536);
  EXPECT_FALSE(closed.bound.holds(0));
  EXPECT_TRUE(closed.bound.holds(1));
  EXPECT_TRUE(closed.bound.holds(65536));
  EXPECT_FALSE(closed.bound.holds(65537));
  ConfigKey<Section> open = config_key("rate", &Section::rate, "").range(0, true, 1, true).or_special(-1, "off");
  EXPECT_FALSE(open.bound.holds(0));
  EXPECT_TRUE(open.bound.holds(1e-300));
  EXPECT_FALSE(open.bound.holds(1));
  EXPECT_TRUE(open.bound.holds(-1));  // the special value
  EXPECT_FALSE(open.bound.holds(-0.5));
  EXPECT_TRUE(config_key("rate", &Section::rate, "").bound.holds(-1e300));  // no bound
}

TEST(ConfigBound, MessagesAndSummaries) {
  auto key = [] { return config_key("size", &Section::size, ""); };
  EXPECT_EQ(key().in(2, 16777216).bound.message(), "in [2, 16777216]");
  EXPECT_EQ(key().in(2, 16777216).bound.summary(), "[2, 2^24]");
  EXPECT_EQ(key().at_least(0).note("0 = all").bound.message(), ">= 0 (0 = all)");
  EXPECT_EQ(key().at_least(1).bound.message(), "at least 1");
  EXPECT_EQ(key().at_least(1).bound.summary(), ">= 1");
  EXPECT_EQ(key().positive().bound.message(), "positive");
  EXPECT_EQ(key().positive().bound.summary(), "> 0");
  ConfigKey<Section> k = key().range(0, true, 16, false).or_special(-1, "the default");
  EXPECT_EQ(k.bound.message(), "in (0, 16] (or -1: the default)");
  EXPECT_EQ(k.bound.summary(), "(0, 16] or -1");
  EXPECT_EQ(key().range(0, false, 1, true).bound.message(), "in [0, 1)");
  EXPECT_EQ(config_number(1e-6), "1e-06");
  EXPECT_EQ(config_number(0.003), "0.003");
}

// The bindings read and write the field they name; an enum by the name of its value.
TEST(ConfigKey, BindingsReadAndWriteTheirField) {
  Section s;
  ConfigKey<Section> seed = config_key("seed", &Section::seed, "");
  EXPECT_EQ(seed.type, ConfigType::count);
  EXPECT_EQ(std::get<int64_t>(seed.get(s)), 7);
  seed.set(s, int64_t(9));
  EXPECT_EQ(s.seed, 9u);
  ConfigKey<Section> name = config_key("name", &Section::name, "");
  EXPECT_EQ(name.type, ConfigType::text);
  name.set(s, std::string("y"));
  EXPECT_EQ(s.name, "y");
  ConfigKey<Section> mode = config_choice(
      "mode", &Section::mode, {{Section::Mode::fast, {"fast", ""}}, {Section::Mode::slow, {"slow", ""}}}, "");
  EXPECT_EQ(mode.type, ConfigType::choice);
  EXPECT_EQ(std::get<std::string>(mode.get(s)), "slow");
  mode.set(s, std::string("fast"));
  EXPECT_EQ(s.mode, Section::Mode::fast);
  EXPECT_EQ(config_key("size", &Section::size, "").type, ConfigType::integer);
  EXPECT_EQ(config_key("rate", &Section::rate, "").type, ConfigType::number);
}

}  // namespace
}  // namespace linattn
