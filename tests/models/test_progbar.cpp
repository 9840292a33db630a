#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "framework/tensor/error.hpp"
#include "models/progbar.hpp"
#include "tests/models/text_fixtures.hpp"

using namespace loom;
using namespace loom::layers;
using namespace loom::testing;

namespace {

/// One event of a case: the fake clock is set to `now`, then the event runs (see make_progbar_fixtures.py).
struct Event {
  double now = 0;
  std::string name;
  std::int64_t index = 0;
  Logs logs;
};

/// A case of tests/fixtures/progbar_fixtures.txt: a Progbar or a ProgbarLogger driven by events, and the
/// bytes Keras printed for the same events.
struct ProgbarCase {
  std::string name, kind;
  std::map<std::string, std::string> options;
  std::vector<Event> events;
  std::string expected;

  std::int64_t integer(const std::string& key) const {
    INFO("case " << name << ", option " << key);
    REQUIRE(options.count(key));
    return std::stoll(options.at(key));
  }
};

std::vector<ProgbarCase> read_cases() {
  std::vector<ProgbarCase> cases;
  for (const std::vector<std::string>& fields : read_text_fixture("progbar_fixtures.txt")) {
    if (fields[0] == "case") {
      REQUIRE(fields.size() >= 3);
      ProgbarCase c{fields[1], fields[2], {}, {}, {}};
      for (std::size_t i = 3; i < fields.size(); ++i) {
        const auto eq = fields[i].find('=');
        REQUIRE(eq != std::string::npos);
        c.options[fields[i].substr(0, eq)] = fields[i].substr(eq + 1);
      }
      cases.push_back(c);
      continue;
    }
    REQUIRE(!cases.empty());
    if (fields[0] == "expect") {
      REQUIRE(fields.size() == 2);
      cases.back().expected = unescape_text(fields[1]);
      continue;
    }
    REQUIRE(fields[0] == "at");
    REQUIRE(fields.size() >= 4);
    REQUIRE(fields.size() % 2 == 0);
    Event event{std::stod(fields[1]), fields[2], std::stoll(fields[3]), {}};
    for (std::size_t i = 4; i < fields.size(); i += 2) event.logs[fields[i]] = std::stod(fields[i + 1]);
    cases.back().events.push_back(event);
  }
  REQUIRE(!cases.empty());
  return cases;
}

/// Options writing to `out` and reading the time from `*clock`.
ProgbarOptions options_for(const ProgbarCase& c, std::ostream& out, const std::shared_ptr<double>& clock) {
  return {.verbose = int(c.integer("verbose")),
          .out = &out,
          .dynamic = c.integer("dynamic") != 0,
          .clock = [clock] { return *clock; },
          .unit_name = c.options.count("unit") ? c.options.at("unit") : "step"};
}

std::string run_progbar_case(const ProgbarCase& c) {
  std::ostringstream out;
  auto clock = std::make_shared<double>(std::stod(c.options.at("start")));
  Progbar bar(c.integer("target"), options_for(c, out, clock));
  for (const Event& e : c.events) {
    *clock = e.now;
    if (e.name == "update") {
      bar.update(e.index, e.logs);
    } else {
      REQUIRE((e.name == "update_final" || e.name == "update_nonfinal"));
      bar.update(e.index, e.logs, e.name == "update_final");
    }
  }
  return out.str();
}

std::string run_logger_case(const ProgbarCase& c) {
  std::ostringstream out;
  auto clock = std::make_shared<double>(0.0);
  ProgbarLogger logger(options_for(c, out, clock));
  logger.set_params(int(c.integer("epochs")), c.integer("steps"));
  for (const Event& e : c.events) {
    *clock = e.now;
    const int i = int(e.index);
    INFO("event " << e.name);
    if (e.name == "train_begin") logger.on_train_begin(e.logs);
    else if (e.name == "train_end") logger.on_train_end(e.logs);
    else if (e.name == "epoch_begin") logger.on_epoch_begin(i, e.logs);
    else if (e.name == "epoch_end") logger.on_epoch_end(i, e.logs);
    else if (e.name == "train_batch_end") logger.on_train_batch_end(i, e.logs);
    else if (e.name == "test_begin") logger.on_test_begin(e.logs);
    else if (e.name == "test_batch_end") logger.on_test_batch_end(i, e.logs);
    else if (e.name == "test_end") logger.on_test_end(e.logs);
    else if (e.name == "predict_begin") logger.on_predict_begin(e.logs);
    else if (e.name == "predict_batch_end") logger.on_predict_batch_end(i, e.logs);
    else if (e.name == "predict_end") logger.on_predict_end(e.logs);
    else FAIL("unknown event " << e.name);
  }
  return out.str();
}

}  // namespace

TEST_CASE("Progbar prints the bytes Keras prints for the same updates and clock", "[progbar]") {
  int checked = 0;
  for (const ProgbarCase& c : read_cases()) {
    if (c.kind != "progbar") continue;
    INFO("case " << c.name);
    CHECK(escape_text(run_progbar_case(c)) == escape_text(c.expected));
    ++checked;
  }
  CHECK(checked >= 15);
}

TEST_CASE("ProgbarLogger prints the bytes Keras prints for the same callback events", "[progbar]") {
  int checked = 0;
  for (const ProgbarCase& c : read_cases()) {
    if (c.kind != "logger") continue;
    INFO("case " << c.name);
    CHECK(escape_text(run_logger_case(c)) == escape_text(c.expected));
    ++checked;
  }
  CHECK(checked >= 8);
}

TEST_CASE("Progbar writing to a string stream prints one clean line when it finishes", "[progbar]") {
  std::ostringstream out;
  double now = 5.0;
  Progbar bar(2, {.out = &out, .clock = [&now] { return now; }});
  now = 6.0;
  bar.update(1);
  CHECK(out.str().empty());
  now = 7.0;
  bar.update(2);
  CHECK(escape_text(out.str()) == escape_text("2/2 ━━━━━━━━━━━━━━━━━━━━ 2s 1s/step\n"));
}

TEST_CASE("Progbar on the real clock finishes with the elapsed time", "[progbar]") {
  std::ostringstream out;
  Progbar bar(3, {.verbose = 2, .out = &out});
  for (int step = 1; step <= 3; ++step) bar.update(step, {{"loss", 0.25}});
  CHECK(out.str().rfind("3/3 - 0s - ", 0) == 0);
  CHECK(out.str().find(" - loss: 0.2500\n") != std::string::npos);
}

TEST_CASE("Progbar and ProgbarLogger reject bad arguments", "[progbar]") {
  CHECK_THROWS_AS(Progbar(3, {.out = nullptr}), Error);
  CHECK_THROWS_AS(ProgbarLogger({.out = nullptr}), Error);
  std::ostringstream out;
  ProgbarLogger logger({.out = &out});
  CHECK_THROWS_AS(logger.set_params(2, -2), Error);
  CHECK_THROWS_AS(logger.set_params(-1, 3), Error);
}

TEST_CASE("ProgbarLogger shows evaluate again after a fit has ended", "[progbar]") {
  std::ostringstream out;
  double now = 1.0;
  ProgbarLogger logger({.verbose = 2, .out = &out, .clock = [&now] { return now; }});
  logger.set_params(1, 1);
  logger.on_train_begin({});
  logger.on_epoch_begin(0, {});
  logger.on_train_batch_end(0, {{"loss", 0.5}});
  logger.on_test_begin({});
  logger.on_test_end({{"loss", 0.75}});  // the validation pass of fit: silent
  logger.on_epoch_end(0, {{"loss", 0.5}, {"val_loss", 0.75}});
  logger.on_train_end({});
  logger.on_test_begin({});
  logger.on_test_batch_end(0, {{"loss", 0.25}});
  logger.on_test_end({{"loss", 0.25}});
  CHECK(out.str() == "1/1 - 0s - 0s/step - loss: 0.5000 - val_loss: 0.7500\n1/1 - 0s - 0s/step - loss: 0.2500\n");
}
