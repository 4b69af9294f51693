// Reference collective timing with raw MPI calls only, OSU micro-benchmark style: each call
// timed on its own between barriers, latency averaged over iterations and then over ranks.
// Independent of src/bench (no shared code), used to cross-check `zaya bench comm`.
//   mpirun -np 2 bench_comm_ref allreduce|allgather SIZE... [--iters N] [--warmup N]
// SIZE is the nccl-tests size S in bytes (for allgather, the whole gathered array).
// Prints CSV: op,nranks,size_bytes,time_us,algbw,busbw (busbw with the nccl-tests factors).
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 3) {
    if (rank == 0) std::fprintf(stderr, "usage: bench_comm_ref allreduce|allgather SIZE... [--iters N] [--warmup N]\n");
    MPI_Finalize();
    return 2;
  }
  std::string op = argv[1];
  if (op != "allreduce" && op != "allgather") {
    if (rank == 0) std::fprintf(stderr, "bench_comm_ref: unknown op '%s'\n", op.c_str());
    MPI_Finalize();
    return 2;
  }
  int iters = 20, warmup = 5;
  std::vector<long> sizes;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = std::atoi(argv[++i]);
    else sizes.push_back(std::atol(argv[i]));
  }
  if (rank == 0) std::printf("op,nranks,size_bytes,time_us,algbw,busbw\n");
  for (long size : sizes) {
    long count = size / 4;
    if (op == "allgather") count = count / n * n;
    std::vector<float> send(size_t(count) + 1, 1.0f + rank), recv(size_t(count) + 1, 0.0f);
    int per_rank = int(op == "allgather" ? count / n : count);
    auto call = [&] {
      if (op == "allreduce")
        MPI_Allreduce(send.data(), recv.data(), per_rank, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      else
        MPI_Allgather(send.data(), per_rank, MPI_FLOAT, recv.data(), per_rank, MPI_FLOAT, MPI_COMM_WORLD);
    };
    for (int i = 0; i < warmup; ++i) call();
    MPI_Barrier(MPI_COMM_WORLD);
    double total = 0;
    for (int i = 0; i < iters; ++i) {
      double t0 = MPI_Wtime();
      call();
      total += MPI_Wtime() - t0;
      MPI_Barrier(MPI_COMM_WORLD);
    }
    double lat = total / iters, sum = 0;
    MPI_Reduce(&lat, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      double t = sum / n, bytes = double(count) * 4;
      double algbw = bytes / 1e9 / t;
      double factor = op == "allreduce" ? 2.0 * (n - 1) / n : double(n - 1) / n;
      std::printf("%s,%d,%.0f,%.3f,%.6f,%.6f\n", op == "allreduce" ? "all_reduce" : "all_gather", n, bytes, t * 1e6, algbw,
                  algbw * factor);
    }
  }
  MPI_Finalize();
  return 0;
}
