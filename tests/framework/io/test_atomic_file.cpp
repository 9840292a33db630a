// What every save and load does with the file system: FIFOs and devices refused without waiting, long names,
// temporaries of interrupted saves collected, symbolic links followed.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "loom.hpp"
#include "tests/temp_files.hpp"

using namespace loom;
using namespace loom::testing;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> temporaries_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const std::string& name : names_in(dir))
    if (name.ends_with(".loom-tmp")) out.push_back(name);
  return out;
}

}  // namespace

TEST_CASE("readers refuse a FIFO or a device at once instead of waiting on it", "[atomic_file]") {
  TempDir dir("atomic-file");
  auto model = layers::Sequential({layers::Input({2}), layers::Dense(1)});
  for (const std::string name : {"x.npy", "x.safetensors", "x.weights.h5", "x.keras"}) {
    const std::string fifo = dir.file(name);
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    INFO(name);
    CHECK_THROWS_WITH(io::load_npy(fifo), Catch::Contains("load_npy") && Catch::Contains("not a regular file"));
    CHECK_THROWS_WITH(io::load_safetensors(fifo), Catch::Contains("not a regular file"));
    if (name == "x.weights.h5") CHECK_THROWS_WITH(model.load_weights(fifo), Catch::Contains("not a regular file"));
    if (name == "x.keras") CHECK_THROWS_AS(models::load_model(fifo), Error);
  }
  CHECK_THROWS_WITH(io::load_npy("/dev/zero"), Catch::Contains("'/dev/zero' is not a regular file"));
  CHECK_THROWS_WITH(io::load_safetensors("/dev/null"), Catch::Contains("is not a regular file"));
  CHECK_THROWS_WITH(io::load_npy(dir.path.string()), Catch::Contains("not a regular file"));
}

TEST_CASE("a file name of 250 bytes saves: the temporary's name stays short", "[atomic_file]") {
  TempDir dir("atomic-file");
  const std::string path = dir.file(std::string(246, 'n') + ".npy");
  io::save_npy(path, Tensor::arange(0.0, 3.0));
  CHECK(io::load_npy(path).to_vector<double>() == std::vector<double>{0, 1, 2});
  CHECK(names_in(dir.path).size() == 1);
}

TEST_CASE("the temporary of an interrupted save is removed by the next save once its writer is gone",
          "[atomic_file]") {
  TempDir dir("atomic-file");
  const std::string path = dir.file("weights.npy");
  // A child killed by SIGXFSZ in the middle of writing: the death a crash or kill -9 gives, deterministically.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    rlimit no_core{0, 0}, small{4096, 4096};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::setrlimit(RLIMIT_FSIZE, &small);
    ::signal(SIGXFSZ, SIG_DFL);
    io::save_npy(path, Tensor::zeros({100'000}));
    ::_exit(0);  // not reached: the write past 4096 bytes kills the process
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGXFSZ);
  const std::vector<std::string> left = temporaries_in(dir.path);
  REQUIRE(left.size() == 1);
  CHECK(left[0].rfind(".weights.npy.", 0) == 0);
  CHECK_FALSE(fs::exists(path));

  // Fresh, it may be a save still under way: kept.
  io::save_npy(path, Tensor::ones({2}));
  CHECK(temporaries_in(dir.path) == left);
  // Old but locked (a writer alive and slow): kept.
  const fs::path temporary = dir.path / left[0];
  fs::last_write_time(temporary, fs::file_time_type::clock::now() - std::chrono::minutes(1));
  const int fd = ::open(temporary.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  io::save_npy(path, Tensor::ones({2}));
  CHECK(temporaries_in(dir.path) == left);
  ::close(fd);
  // Old and unlocked: its writer is gone, the next save removes it. Other files are never touched.
  write_bytes(dir.file(".other.npy.0000000000000000.0000000000000000.loom-tmp"), "another target's");
  fs::last_write_time(dir.path / ".other.npy.0000000000000000.0000000000000000.loom-tmp",
                      fs::file_time_type::clock::now() - std::chrono::minutes(1));
  io::save_npy(path, Tensor::ones({3}));
  CHECK(temporaries_in(dir.path) == std::vector<std::string>{".other.npy.0000000000000000.0000000000000000.loom-tmp"});
  CHECK(io::load_npy(path).shape() == Shape{3});
}

TEST_CASE("saving onto a symbolic link writes the file it points at and keeps the link", "[atomic_file]") {
  TempDir dir("atomic-file");
  fs::create_directories(dir.path / "real");
  const fs::path target = dir.path / "real" / "w.npy";
  io::save_npy(target.string(), Tensor::ones({1}));
  fs::create_symlink("real/w.npy", dir.path / "link.npy");
  fs::create_symlink("link.npy", dir.path / "link_to_link.npy");
  io::save_npy(dir.file("link_to_link.npy"), Tensor::ones({4}));
  CHECK(fs::is_symlink(dir.path / "link.npy"));
  CHECK(fs::is_symlink(dir.path / "link_to_link.npy"));
  CHECK(io::load_npy(target.string()).shape() == Shape{4});
  CHECK(names_in(dir.path / "real") == std::vector<std::string>{"w.npy"});  // the temporary was beside the target

  fs::create_symlink("real/new.npy", dir.path / "dangling.npy");
  io::save_npy(dir.file("dangling.npy"), Tensor::ones({5}));
  CHECK(fs::is_symlink(dir.path / "dangling.npy"));
  CHECK(io::load_npy((dir.path / "real" / "new.npy").string()).shape() == Shape{5});

  fs::create_symlink("loop_b.npy", dir.path / "loop_a.npy");
  fs::create_symlink("loop_a.npy", dir.path / "loop_b.npy");
  CHECK_THROWS_WITH(io::save_npy(dir.file("loop_a.npy"), Tensor::ones({1})),
                    Catch::Contains("save_npy") && Catch::Contains("symbolic links in a chain"));
}
