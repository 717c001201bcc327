#include "core/config_key.h"

#include <cmath>
#include <sstream>

namespace linattn {

std::string config_number(double v) {
  std::ostringstream os;
  os.precision(15);
  os << v;
  return os.str();
}

namespace {

// 2^k for the powers of two from 2^16 up, which read better so in the reference.
std::string short_number(double v) {
  int exponent = 0;
  if (v >= 65536 && std::frexp(v, &exponent) == 0.5) return "2^" + std::to_string(exponent - 1);
  return config_number(v);
}

}  // namespace

bool ConfigBound::holds(double v) const {
  if (special && v == *special) return true;
  if (min && (min_open ? v <= *min : v < *min)) return false;
  if (max && (max_open ? v >= *max : v > *max)) return false;
  return true;
}

std::string ConfigBound::message() const {
  std::string m;
  if (min && max) {
    m = std::string("in ") + (min_open ? "(" : "[") + config_number(*min) + ", " + config_number(*max) +
        (max_open ? ")" : "]");
  } else if (min) {
    m = min_open ? (*min == 0 ? "positive" : "> " + config_number(*min))
                 : (*min == 0 ? ">= 0" : "at least " + config_number(*min));
  } else if (max) {
    m = (max_open ? "< " : "at most ") + config_number(*max);
  }
  if (special) m += " (or " + config_number(*special) + ": " + special_doc + ")";
  if (!note.empty()) m += " (" + note + ")";
  return m;
}

std::string ConfigBound::summary() const {
  std::string s;
  if (min && max) {
    s = std::string(min_open ? "(" : "[") + short_number(*min) + ", " + short_number(*max) + (max_open ? ")" : "]");
  } else if (min) {
    s = (min_open ? "> " : ">= ") + short_number(*min);
  } else if (max) {
    s = (max_open ? "< " : "<= ") + short_number(*max);
  }
  if (special) s += " or " + config_number(*special);
  return s;
}

}  // namespace linattn
