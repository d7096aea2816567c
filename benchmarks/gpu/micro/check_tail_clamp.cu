// The ptxas issue found on an H200 in session 33 (gpu_hopper_v15_h200_diagnosis.log): a tail
// extent clamped as max(min(x, box), 0) and then compared with box (hopper::check_tail) becomes
// one VIMNMX.RELU whose predicate ptxas 13.0 takes for "extent == box"; the check then traps where
// it holds. check_tail launders the extent through a shuffle since. run.sh gpu builds and runs
// this first: variants 2 and 3 (check_tail) must print "no error"; variant 4 (the same check
// without the shuffle) shows whether the compiler still does it.
//   check_tail_clamp 2|3|4
#include "tandem_hopper.cuh"
#include <cstdio>
#include <cstdlib>
__device__ __forceinline__ void check_b(int extent, int box, int coordinate, int tensor_extent) {
    const int over = extent - box;
    if (over > 0 || (over != 0 && coordinate + extent < tensor_extent))
        __trap();
}
// k2: the min/max pattern alone.
__global__ void k2(int e0, int *out) {
    const int tx = blockIdx.x;
    const int e = hopper::max_of<int>(hopper::min_of<int>(e0 - tx * 256, 256), 0);
    int tails_ok = 1;
    hopper::check_tail(tails_ok, e, 256, tx * 256, e0);
    out[tx] = e;
    hopper::trap_unless(tails_ok);
}
// k3: the elementwise kernel's two store checks as emitted, in a grid of 4.
template <int variant> __global__ void k3(int E0, int E1, int *out) {
    int tails_ok = 1;
    for (int it = 0,
             end = hopper::floor_div(((int(gridDim.x) + ((hopper::floor_div((E0 + 255), 256) *
                                                          hopper::floor_div((E1 + 15), 16)) -
                                                         int(blockIdx.x))) +
                                      -1),
                                     int(gridDim.x));
         it < end; it++) {
        const int t = int(blockIdx.x) + int(gridDim.x) * it;
        const int offset = (((hopper::floor_div(t, hopper::floor_div((E0 + 255), 256)) * E0) +
                             (hopper::floor_mod(t, hopper::floor_div((E0 + 255), 256)) * 16)) *
                            16);
        const int cols = hopper::max_of<int>(
            hopper::min_of<int>(
                (E0 - (hopper::floor_mod(t, hopper::floor_div((E0 + 255), 256)) * 256)), 256),
            0);
        const int rows = hopper::max_of<int>(
            hopper::min_of<int>(
                (E1 - (hopper::floor_div(t, hopper::floor_div((E0 + 255), 256)) * 16)), 16),
            0);
        if (variant == 0) {
            hopper::check_tail(tails_ok, cols, 256, offset % E0, E0);
            hopper::check_tail(tails_ok, rows, 16, offset / E0 % E1, E1);
        } else {
            check_b(cols, 256, offset % E0, E0);
            check_b(rows, 16, offset / E0 % E1, E1);
        }
        out[t] = cols * 1000 + rows;
    }
    hopper::trap_unless(tails_ok);
}
int main(int argc, char **argv) {
    int *d;
    cudaMalloc(&d, 64 * 4);
    const int which = atoi(argv[1]);
    if (which == 2)
        k2<<<4, 1>>>(808, d);
    if (which == 3)
        k3<0><<<4, 1>>>(808, 5, d);
    if (which == 4)
        k3<1><<<4, 1>>>(808, 5, d);
    printf("variant %d: %s\n", which, cudaGetErrorString(cudaDeviceSynchronize()));
    return 0;
}
