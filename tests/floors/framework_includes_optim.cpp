// Compiled with the framework floor's include rules only, by the test floors_are_enforced_by_the_build:
// the include below must be "file not found" (tests/CMakeLists.txt).
#include "optim/optimizer.hpp"
