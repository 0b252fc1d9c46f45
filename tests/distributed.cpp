// kiln::distributed on the CPU: the environment torchrun sets, the gradient buckets, the TCP
// process group (sums that give every rank the same bits; mismatched, missing and dead ranks are
// errors on every rank, never a hang), the buckets summed while the backward runs (a recording
// communicator), and kiln::Trainer on two ranks against one process with the global batch.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kiln/distributed/connect.hpp"
#include "stacked_models.hpp"

namespace {
namespace fs = std::filesystem;
namespace dist = kiln::distributed;
using kiln::Shape;
using kiln::Tensor;
using namespace std::chrono_literals;

// A port no one listens on now.
int free_port() { return dist::port_of(dist::listen_on(0, 1)); }

dist::Environment rank_of(int rank, int world, int port) { return {rank, world, rank, "127.0.0.1", port}; }

// f(rank) on one thread per rank; each rank's exception message, or "" where it returned.
std::vector<std::string> on_ranks(int world, const std::function<void(int)>& f) {
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        f(r);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

// Sets environment variables for one scope, restoring what was there.
struct ScopedEnv {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  void set(const char* name, const char* value) {
    const char* old = std::getenv(name);
    saved.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it)
      if (it->second) ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else ::unsetenv(it->first.c_str());
  }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const kiln::DistributedError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("distributed: the environment torchrun sets") {
  ScopedEnv env;
  for (const char* v : {"WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}) env.set(v, nullptr);
  CHECK(!dist::Environment::from_env().is_distributed());
  env.set("WORLD_SIZE", "1");
  CHECK(dist::Environment::from_env().world_size == 1);
  env.set("WORLD_SIZE", "4"), env.set("RANK", "2"), env.set("LOCAL_RANK", "1"), env.set("MASTER_ADDR", "node0"),
      env.set("MASTER_PORT", "29501");
  const auto e = dist::Environment::from_env();
  CHECK(e.world_size == 4);
  CHECK(e.rank == 2);
  CHECK(e.local_rank == 1);
  CHECK(e.master_addr == "node0");
  CHECK(e.master_port == 29501);
  // Each malformed or missing variable is named.
  const auto fails_naming = [&](const char* name, const char* value, const char* says) {
    ScopedEnv one;
    one.set(name, value);
    const std::string what = error_of([] { dist::Environment::from_env(); });
    CHECK_MESSAGE(what.find(says) != std::string::npos, what);
  };
  fails_naming("RANK", "4", "RANK is 4, outside [0, 3]");
  fails_naming("RANK", nullptr, "RANK is not set but WORLD_SIZE is 4");
  fails_naming("WORLD_SIZE", "two", "WORLD_SIZE is \"two\", not an integer");
  fails_naming("WORLD_SIZE", "0", "WORLD_SIZE is 0, outside");
  fails_naming("MASTER_PORT", "70000", "MASTER_PORT is 70000, outside [1, 65535]");
  fails_naming("MASTER_ADDR", nullptr, "MASTER_ADDR is not set");
  fails_naming("RANK", "1x", "RANK is \"1x\", not an integer");
}

TEST_CASE("distributed: gradient buckets are runs of adjacent parts in the order they are finished, within the cap") {
  // Six parts as a FlatState lays them out (offsets aligned to 16), finished in reverse.
  const std::vector<dist::GradientPart> parts{{"a", 0, 12}, {"b", 16, 40}, {"c", 64, 4}, {"d", 80, 100}, {"e", 192, 4}, {"f", 208, 8}};
  const std::vector<std::size_t> reverse{5, 4, 3, 2, 1, 0};
  SUBCASE("a cap of 64 floats") {
    const auto b = dist::plan_buckets(parts, reverse, 4, 64 * 4);
    // f + e (208..216 and 192..196: 24 elements); d alone is 100 > 64; c + b (16..68: 52); a.
    REQUIRE(b.size() == 4);
    CHECK(b[0].begin == 192); CHECK(b[0].end == 216); CHECK(b[0].parts == std::vector<std::size_t>{5, 4});
    CHECK(b[1].begin == 80); CHECK(b[1].end == 180); CHECK(b[1].parts == std::vector<std::size_t>{3});
    CHECK(b[2].begin == 16); CHECK(b[2].end == 68); CHECK(b[2].parts == std::vector<std::size_t>{2, 1});
    CHECK(b[3].begin == 0); CHECK(b[3].end == 12); CHECK(b[3].parts == std::vector<std::size_t>{0});
  }
  SUBCASE("a cap larger than everything: one bucket") {
    const auto b = dist::plan_buckets(parts, reverse, 4, 25u << 20);
    REQUIRE(b.size() == 1);
    CHECK(b[0].begin == 0); CHECK(b[0].end == 216); CHECK(b[0].parts.size() == 6);
  }
  SUBCASE("parts finished out of the buffer's order start a new bucket") {
    const auto b = dist::plan_buckets(parts, {5, 3, 4, 2, 1, 0}, 4, 25u << 20);
    REQUIRE(b.size() == 2);  // f; d (not adjacent to f), then e (adjacent to d), c, b and a
    CHECK(b[0].parts == std::vector<std::size_t>{5});
    CHECK(b[1].parts == std::vector<std::size_t>{3, 4, 2, 1, 0});
  }
  CHECK_THROWS_AS(dist::plan_buckets(parts, {0, 1}, 4, 100), kiln::ValueError);
}

TEST_CASE("distributed: sums over a TCP process group give every rank the same bits, added in rank order") {
  constexpr int W = 3;
  constexpr std::size_t n = 1000;
  const int port = free_port();
  std::vector<std::vector<double>> values(W), results(W);
  std::vector<std::vector<float>> floats(W);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> d;
  for (int r = 0; r < W; ++r) {
    for (std::size_t i = 0; i < n; ++i) values[r].push_back(d(rng) * std::pow(10.0, static_cast<double>(i % 7)));
    for (std::size_t i = 0; i < 10; ++i) floats[r].push_back(static_cast<float>(d(rng)));
  }
  std::vector<double> host(W);
  const auto errors = on_ranks(W, [&](int r) {
    dist::TcpCommunicator comm(rank_of(r, W, port), "the same model\n", 20s);
    CHECK(comm.rank() == r);
    CHECK(comm.size() == W);
    results[r] = values[r];
    comm.all_reduce_sum(results[r].data(), n, kiln::Device::cpu());
    comm.all_reduce_sum(floats[r].data(), floats[r].size(), kiln::Device::cpu());
    double one = r + 1.0;
    comm.all_reduce_host(&one, 1);
    host[r] = one;
  });
  for (int r = 0; r < W; ++r) REQUIRE_MESSAGE(errors[r].empty(), errors[r]);
  for (std::size_t i = 0; i < n; ++i) {
    const double expected = (values[0][i] + values[1][i]) + values[2][i];
    for (int r = 0; r < W; ++r) REQUIRE(results[r][i] == expected);  // the bits, on every rank
  }
  for (int r = 1; r < W; ++r) CHECK(floats[r] == floats[0]);
  for (int r = 0; r < W; ++r) CHECK(host[r] == 6.0);
}

TEST_CASE("distributed: ranks that differ, do not come or stop are errors on every rank, never a hang") {
  SUBCASE("a different model") {
    const int port = free_port();
    const auto errors = on_ranks(2, [&](int r) {
      dist::TcpCommunicator comm(rank_of(r, 2, port), r == 0 ? "parameter w [3, 4]\n" : "parameter w [3, 5]\n", 20s);
    });
    for (const auto& e : errors) {
      CHECK_MESSAGE(e.find("rank 1's model or training arguments differ from rank 0's") != std::string::npos, e);
      CHECK_MESSAGE(e.find("rank 0 has \"parameter w [3, 4]\" where rank 1 has \"parameter w [3, 5]\"") != std::string::npos, e);
    }
  }
  SUBCASE("a different world size") {
    const int port = free_port();
    const auto errors = on_ranks(2, [&](int r) { dist::TcpCommunicator comm(rank_of(r, r == 0 ? 2 : 3, port), "m\n", 20s); });
    for (const auto& e : errors) CHECK_MESSAGE(e.find("rank 1 has WORLD_SIZE 3, rank 0 has 2") != std::string::npos, e);
  }
  SUBCASE("a rank that never joins") {
    const int port = free_port();
    const std::string e = error_of([&] { dist::TcpCommunicator comm(rank_of(0, 3, port), "m\n", 300ms); });
    CHECK_MESSAGE(e.find("rank(s) 1, 2 did not join rank 0") != std::string::npos, e);
    const std::string f = error_of([&] { dist::TcpCommunicator comm(rank_of(1, 2, free_port()), "m\n", 300ms); });
    CHECK_MESSAGE(f.find("could not reach rank 0 at 127.0.0.1:") != std::string::npos, f);
  }
  SUBCASE("a rank that stops, one that stops answering, one that sums another count") {
    const int port = free_port();
    const auto errors = on_ranks(3, [&](int r) {
      dist::TcpCommunicator comm(rank_of(r, 3, port), "m\n", 1s);
      double v[4] = {1, 2, 3, 4};
      comm.all_reduce_sum(v, 4, kiln::Device::cpu());
      if (r == 2) return;  // stops: its socket closes
      comm.all_reduce_sum(v, 4, kiln::Device::cpu());
    });
    CHECK_MESSAGE(errors[0].find("rank 2 closed the connection") != std::string::npos, errors[0]);
    CHECK(errors[2].empty());
    CHECK_MESSAGE(!errors[1].empty(), "rank 1 waited for rank 0, which failed: its connection closes");
    const int port2 = free_port();
    const auto silent = on_ranks(2, [&](int r) {
      dist::TcpCommunicator comm(rank_of(r, 2, port2), "m\n", 1s);
      double v[2] = {1, 2};
      if (r == 1) {
        std::this_thread::sleep_for(2500ms);  // alive but not answering within the timeout
        return;
      }
      comm.all_reduce_sum(v, 2, kiln::Device::cpu());
    });
    CHECK_MESSAGE(silent[0].find("timed out waiting for rank 1") != std::string::npos, silent[0]);
    const int port3 = free_port();
    const auto counts = on_ranks(2, [&](int r) {  // counts large enough that a message is many packets
      dist::TcpCommunicator comm(rank_of(r, 2, port3), "m\n", 20s);
      std::vector<double> v(r == 0 ? 400000 : 500000, 1.0);
      comm.all_reduce_sum(v.data(), v.size(), kiln::Device::cpu());
    });
    for (const auto& e : counts) CHECK_MESSAGE(e.find("rank 1 sums 500000 values where rank 0 sums 400000") != std::string::npos, e);
  }
  CHECK_THROWS_AS(dist::connect(rank_of(0, 2, 1), "gloo", kiln::Device::cpu(), "m\n", 1s), kiln::ValueError);
  CHECK(dist::connect(rank_of(0, 1, 1), "", kiln::Device::cpu(), "m\n", 1s) == nullptr);
}

namespace {
using Stacked = kiln::test::Stacked<double>;
using OneProgram = kiln::test::OneProgram<double>;
using Data = kiln::test::Data<double>;

kiln::train::Parameters<double> initial(std::uint64_t seed) { return kiln::test::stacked_weights<double>(seed); }

// A communicator of a world of two identical ranks (each sum doubles the values) that records
// each call: its range of the flat gradient buffer, and whether layer 0's gradients (written by
// the backward's last layer program) were still zero then.
struct Recording final : dist::Communicator {
  const double* base = nullptr;
  std::size_t layer0_begin = 0, layer0_end = 0;
  struct Call {
    std::size_t begin, count;
    bool layer0_written;
  };
  std::vector<Call> calls;
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void all_reduce_sum(float*, std::size_t, kiln::Device) override { FAIL("the gradients are double"); }
  void all_reduce_sum(double* data, std::size_t count, kiln::Device) override {
    bool written = false;
    for (std::size_t i = layer0_begin; i < layer0_end; ++i) written = written || base[i] != 0.0;
    calls.push_back({static_cast<std::size_t>(data - base), count, written});
    for (std::size_t i = 0; i < count; ++i) data[i] *= 2;
  }
  void all_reduce_host(double* data, std::size_t count) override {
    for (std::size_t i = 0; i < count; ++i) data[i] *= 2;
  }
};

kiln::TrainingArguments arguments(const std::string& name, long batch) {
  kiln::TrainingArguments a;
  a.max_steps = 8, a.per_device_train_batch_size = batch, a.learning_rate = 0.05, a.warmup_steps = 2;
  a.weight_decay = 0.01, a.max_grad_norm = 0.5, a.logging_steps = 1, a.save_steps = 4, a.print_logs = false;
  a.output_dir = (fs::temp_directory_path() / ("kiln_distributed_" + name + "_" + std::to_string(::getpid()))).string();
  fs::remove_all(a.output_dir);
  return a;
}
}  // namespace

TEST_CASE("StackedStep: each gradient bucket is summed as soon as the backward has finished it") {
  using Engine = kiln::train::StackedStep<Stacked>;
  using F = kiln::train::FlatState<double>;
  const Data data(10, 3);
  const std::vector<std::size_t> rows{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const auto batch = data.batch(rows);
  const auto start = initial(4);
  kiln::test::FlatViews<Engine, double> state(start), expected(start);  // expected: the same step without sums
  auto& flat = state.flat;
  auto &params = state.params, &moments = state.moments;
  auto &params_ref = expected.params, &moments_ref = expected.moments;

  // Flat parts (offset, size): w_in (0, 12), layer0.w (16, 16), layer0.b (32, 4), layer1.w
  // (48, 16), layer1.b (64, 4), w_out (80, 8). With a cap of 16 doubles no two adjacent parts
  // fit one bucket: six buckets, from w_out back to w_in.
  Recording comm;
  dist::Reducer<double> reducer = flat->gradient_reducer(comm, 16 * sizeof(double));
  const auto& buckets = reducer.buckets();
  REQUIRE(buckets.size() == 6);
  comm.base = flat->whole(F::kGrad).data();
  comm.layer0_begin = flat->offset(1), comm.layer0_end = flat->offset(2) + 4;

  Engine engine, reference;
  engine.use_flat(flat), reference.use_flat(expected.flat);
  kiln::train::Hyper<double> hyper;
  hyper.max_grad_norm_value = 0.5, hyper.weight_decay_value = 0.01;
  hyper.set(0.05, 1, 0.5);  // the doubled sums scaled back: the update of one rank alone
  const auto [loss, norm] = engine.step(batch.bindings(), params, moments, hyper, &reducer);
  hyper.set(0.05, 1, 1.0);
  const auto [loss_ref, norm_ref] = reference.step(batch.bindings(), params_ref, moments_ref, hyper);

  // One call per bucket, in order, each over its range; the buckets of the head and of layer 1
  // were summed before layer 0's program wrote its gradients, the rest after.
  REQUIRE(comm.calls.size() == buckets.size());
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    CHECK(comm.calls[b].begin == buckets[b].begin);
    CHECK(comm.calls[b].count == buckets[b].end - buckets[b].begin);
    CHECK(comm.calls[b].layer0_written == (b >= 3));
  }
  CHECK(loss == doctest::Approx(loss_ref).epsilon(1e-12));
  CHECK(norm == doctest::Approx(norm_ref).epsilon(1e-12));
  for (const auto& [name, t] : params_ref)
    for (std::size_t i = 0; i < t.numel(); ++i) CHECK(params.at(name)[i] == doctest::Approx(t[i]).epsilon(1e-12));
  CHECK(engine.whole_buffer_updates() == 1);
}

TEST_CASE("Trainer: two ranks over TCP train as one process does with the global batch") {
  // Two ranks with batches of 3 against one process with batches of 6: 24 samples, 4 updates
  // an epoch, 8 updates. Rank r takes samples r, r + 2, ... of each epoch's order, so each of
  // its batches is half of the one process's batch; the loss is a mean, so the mean of the
  // ranks' gradients is the global batch's.
  const Data data(24, 21), eval(10, 22);
  const auto check_run = [&]<class Model>(std::type_identity<Model>, const char* name, long accumulate) {
    CAPTURE(name);
    auto one_args = arguments(std::string(name) + "_one", 6);
    one_args.gradient_accumulation_steps = accumulate;
    kiln::Trainer<Model> one(one_args, initial(5));
    one.train(data);
    const double one_eval = one.evaluate(eval);
    const int port = free_port();
    std::vector<kiln::train::Parameters<double>> weights(2);
    std::vector<std::vector<kiln::train::LogRecord>> logs(2);
    std::vector<double> evals(2);
    std::vector<std::string> dirs(2);
    const auto errors = on_ranks(2, [&](int r) {
      auto args = arguments(std::string(name) + "_rank" + std::to_string(r), 3);
      args.gradient_accumulation_steps = accumulate;
      dirs[r] = args.output_dir;
      // Rank 1 starts from other weights: the Trainer takes rank 0's.
      kiln::Trainer<Model> t(args, initial(r == 0 ? 5 : 6), kiln::Device::cpu(), rank_of(r, 2, port));
      CHECK(t.world_size() == 2);
      CHECK(t.process_index() == r);
      CHECK(t.gradient_buckets().size() == 1);  // 0.5 KB of gradients, a cap of 25 MiB
      t.train(data);
      evals[r] = t.evaluate(eval);
      logs[r] = t.log_history();
      for (const auto& [n, w] : t.parameters()) weights[r].emplace(n, w);
    });
    for (const auto& e : errors) REQUIRE_MESSAGE(e.empty(), e);
    for (const auto& [n, w] : one.parameters()) {
      CAPTURE(n);
      for (std::size_t i = 0; i < w.numel(); ++i) {
        REQUIRE(weights[0].at(n)[i] == weights[1].at(n)[i]);  // the same bits on both ranks
        CHECK(weights[0].at(n)[i] == doctest::Approx(w[i]).epsilon(1e-11));
      }
    }
    REQUIRE(logs[0].size() == one.log_history().size());
    // (A record has NaN where it has no such value: the training records no eval_loss, the
    // evaluation's record no loss.)
    const auto same = [](double a, double b, double eps) {
      return std::isnan(a) ? std::isnan(b) : eps == 0 ? a == b : a == doctest::Approx(b).epsilon(eps);
    };
    for (std::size_t i = 0; i < logs[0].size(); ++i) {
      const auto& a = logs[0][i];
      const auto& b = one.log_history()[i];
      CHECK(same(a.loss, b.loss, 1e-11));
      CHECK(same(a.grad_norm, b.grad_norm, 1e-11));
      CHECK(same(a.eval_loss, b.eval_loss, 1e-11));
      CHECK(same(logs[1][i].loss, a.loss, 0));
    }
    CHECK(evals[0] == doctest::Approx(one_eval).epsilon(1e-11));
    CHECK(evals[1] == evals[0]);
    // Only rank 0 logs and saves.
    CHECK(fs::exists(fs::path(dirs[0]) / "trainer_log.jsonl"));
    CHECK(fs::exists(fs::path(dirs[0]) / "checkpoint-8" / "model.safetensors"));
    CHECK(!fs::exists(dirs[1]));
    for (const auto& d : {dirs[0], dirs[1], one_args.output_dir}) fs::remove_all(d);
  };
  check_run(std::type_identity<Stacked>{}, "stacked", 1);
  check_run(std::type_identity<OneProgram>{}, "one_program", 1);
  check_run(std::type_identity<Stacked>{}, "stacked_accumulated", 2);

  // Ranks given data of different sizes: an error on both, before any step.
  const Data other(20, 21);
  const int port_data = free_port();
  const auto sizes = on_ranks(2, [&](int r) {
    kiln::Trainer<Stacked> t(arguments("sizes" + std::to_string(r), 3), initial(5), kiln::Device::cpu(), rank_of(r, 2, port_data));
    t.train(r == 0 ? data : other);
  });
  for (const auto& e : sizes) CHECK_MESSAGE(e.find("the ranks' datasets differ in size") != std::string::npos, e);

  // Ranks whose arguments differ fail at the rendezvous, naming the argument.
  const int port = free_port();
  const auto errors = on_ranks(2, [&](int r) {
    auto args = arguments("mismatch" + std::to_string(r), r == 0 ? 3 : 4);
    kiln::Trainer<Stacked> t(args, initial(5), kiln::Device::cpu(), rank_of(r, 2, port));
  });
  for (const auto& e : errors)
    CHECK_MESSAGE(e.find("rank 0 has \"per_device_train_batch_size 3\" where rank 1 has \"per_device_train_batch_size 4\"") !=
                      std::string::npos, e);
}

TEST_CASE("Trainer: two ranks resumed from rank 0's checkpoint continue to the bit") {
  // Two ranks train 8 updates; two others train 4 (max_steps 8, stopped by training a copy of
  // the arguments with max_steps 4 would change the schedule, so the first run saves at step 4
  // and the second pair resumes from that checkpoint, written by rank 0 alone).
  const Data data(24, 41);
  const std::string dir = (fs::temp_directory_path() / ("kiln_distributed_resume_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  // Each rank's weights after train(data, {}, resume) with the given save_steps.
  const auto run = [&](long save_steps, const std::string& resume) {
    std::vector<kiln::train::Parameters<double>> weights(2);
    const int port = free_port();
    const auto errors = on_ranks(2, [&](int r) {
      auto args = arguments("resume_rank" + std::to_string(r), 3);
      args.save_steps = save_steps, args.output_dir = dir + "/rank" + std::to_string(r);
      kiln::Trainer<Stacked> t(args, initial(7), kiln::Device::cpu(), rank_of(r, 2, port));
      t.train(data, kiln::train::NoData{}, resume);
      for (const auto& [n, w] : t.parameters()) weights[r].emplace(n, w);
    });
    for (const auto& e : errors) REQUIRE_MESSAGE(e.empty(), e);
    return weights;
  };
  const auto whole = run(4, "");
  const std::string checkpoint = dir + "/rank0/checkpoint-4";
  REQUIRE(fs::exists(checkpoint + "/optimizer.safetensors"));
  REQUIRE(!fs::exists(dir + "/rank1"));  // rank 1 wrote nothing
  // One process cannot resume a checkpoint of two ranks (its batches count per rank).
  kiln::Trainer<Stacked> alone(arguments("resume_alone", 3), initial(7), kiln::Device::cpu(), dist::Environment{});
  CHECK_THROWS_WITH_AS(alone.train(data, kiln::train::NoData{}, checkpoint),
                       doctest::Contains("was saved by a run of 2 rank(s); this run has 1: resume with as many ranks"),
                       kiln::ValueError);
  const auto resumed = run(0, checkpoint);  // both ranks read rank 0's checkpoint
  for (int r = 0; r < 2; ++r)
    for (const auto& [n, w] : whole[0]) {
      CAPTURE(n);
      for (std::size_t i = 0; i < w.numel(); ++i) REQUIRE(resumed[r].at(n)[i] == w[i]);
    }
  fs::remove_all(dir);
}

// Run by ctest as `scripts/launch.sh -n 2 test_distributed --no-skip --test-case=*processes*`:
// each process is a rank, its place read from the environment as a user's program reads it.
TEST_CASE("Trainer: ranks started as processes by scripts/launch.sh agree with one process" * doctest::skip()) {
  const auto env = dist::Environment::from_env();
  REQUIRE_MESSAGE(env.world_size == 2, "run this case under scripts/launch.sh -n 2");
  const Data data(24, 31);
  // The one-process run with the global batch, in this process.
  kiln::Trainer<Stacked> one(arguments("launched_one" + std::to_string(env.rank), 6), initial(8), kiln::Device::cpu(),
                             dist::Environment{});
  one.train(data);
  kiln::Trainer<Stacked> ranked(arguments("launched_rank" + std::to_string(env.rank), 3), initial(8));
  REQUIRE(ranked.world_size() == 2);
  ranked.train(data);
  double mine = 0;
  for (const auto& [n, w] : ranked.parameters()) {
    for (std::size_t i = 0; i < w.numel(); ++i) {
      mine += w[i];
      CHECK(w[i] == doctest::Approx(one.parameters().at(n)[i]).epsilon(1e-11));
    }
  }
  // The same bits on both ranks: x + y == 2 x exactly when y == x.
  auto comm = dist::connect(env, "tcp", kiln::Device::cpu(), "check\n", 60s);
  double both = mine;
  comm->all_reduce_host(&both, 1);
  CHECK(both == 2 * mine);
  for (const char* d : {"launched_one", "launched_rank"})
    fs::remove_all(fs::temp_directory_path() / (std::string("kiln_distributed_") + d + std::to_string(env.rank) + "_" + std::to_string(::getpid())));
  std::printf("rank %d of %d: weights agree with one process and with the other rank\n", env.rank, env.world_size);
}
