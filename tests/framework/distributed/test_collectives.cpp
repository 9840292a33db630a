#include <catch2/catch.hpp>

#include <vector>

#include "framework/distributed/collectives.hpp"
#include "optim/distributed_optimizer.hpp"
#include "optim/sgd.hpp"
#include "tests/test_helpers.hpp"

using namespace loom;
using loom::testing::skip_test;

// The collective calls are checked under mpiexec by tests/distributed; these run in the one-process suite.

TEST_CASE("distributed without MPI support is one process and names the missing feature", "[distributed]") {
  if (distributed::available()) return skip_test("built with MPI: the next test case applies");
  CHECK(distributed::rank() == 0);
  CHECK(distributed::world_size() == 1);
  CHECK_THROWS_WITH((void)distributed::init(),
                    "distributed::init: loom was built without MPI support (configure with MPI installed: "
                    "libopenmpi-dev, or -DLOOM_WITH_MPI=ON)");
  const auto not_built = [](const char* function) {
    return Catch::Contains(std::string("distributed::") + function + ": loom was built without MPI support");
  };
  CHECK_THROWS_WITH(distributed::finalize(), not_built("finalize"));
  CHECK_THROWS_WITH(distributed::broadcast_variables({}), not_built("broadcast_variables"));
  CHECK_THROWS_WITH(distributed::allreduce_gradients({}), not_built("allreduce_gradients"));
  CHECK_THROWS_WITH(distributed::allreduce_sum(1.0), not_built("allreduce_sum"));
  CHECK_THROWS_WITH(distributed::broadcast(std::uint64_t{7}), not_built("broadcast"));
  CHECK_THROWS_WITH(distributed::DistributedOptimizer(optim::SGD()), not_built("DistributedOptimizer"));
}

TEST_CASE("distributed with MPI support is one process until init", "[distributed]") {
  if (!distributed::available()) return skip_test("built without MPI: the previous test case applies");
  CHECK(distributed::rank() == 0);
  CHECK(distributed::world_size() == 1);
  CHECK_THROWS_WITH(distributed::allreduce_gradients({}),
                    "distributed::allreduce_gradients: MPI is not initialised; call distributed::init(&argc, &argv) "
                    "first");
  CHECK_THROWS_WITH(distributed::DistributedOptimizer(optim::SGD()),
                    Catch::Contains("distributed::DistributedOptimizer: MPI is not initialised"));
}
