#!/usr/bin/env python3
"""Issue 37: why do the cluster GEMMs lose 30-73% on an H200? Builds variants of emitted cluster
kernels that each change one thing, for one GPU run beside the kernels as emitted:
  _cta   the peers' empty-barrier arrivals at the default semantics (release, CTA scope: the form
         CUTLASS's ClusterBarrier::arrive uses) instead of release at cluster scope;
  _nomc  no multicast: each CTA loads its own B and releases only its own slots (the cluster
         launch, grid and tail kept), isolating the launch from the multicast and the coupling.
  cluster_variants.py FROM_DIR TO_DIR NAME...   (FROM_DIR: run.sh emit's kernels)"""
import re
import sys
from pathlib import Path

CTA_ARRIVE = '''namespace variant {
__device__ __forceinline__ void arrive_cta(uint64_t *barrier, uint32_t rank) {
    asm volatile("{\\n.reg .b32 remote;\\nmapa.shared::cluster.u32 remote, %0, %1;\\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote];\\n}\\n"
                 ::"r"(hopper::shared_address(barrier)), "r"(rank) : "memory");
}
}
'''


def cta(src):
    src = src.replace('hopper::mbarrier_arrive_cluster(', 'variant::arrive_cta(')
    return src.replace('\n__global__', '\n' + CTA_ARRIVE + '__global__', 1)


def nomc(src):
    src = re.sub(r'for \(uint32_t rank = 0; rank < 2; rank\+\+\) hopper::mbarrier_arrive_cluster\((&[^;]*\]), rank\);',
                 r'hopper::mbarrier_arrive(\1);', src)
    src = re.sub(r'(mbarrier_init\(&\w+_empty\[slot\], )(\d+)\)', lambda m: f'{m[1]}{int(m[2]) // 2})', src)
    src = re.sub(r'if \(box\+\+ % 2 == int\(hopper::cluster_rank\(\)\)\) hopper::tma_load_multicast\(([^,]+), ([^,]+), ([^,]+), 0x3, ',
                 r'hopper::tma_load(\1, \2, \3, ', src)
    return src


def main():
    source, target = Path(sys.argv[1]), Path(sys.argv[2])
    target.mkdir(parents=True, exist_ok=True)
    registry = (source / 'registry.inc').read_text().splitlines()
    rows, sets = [], []
    for name in sys.argv[3:]:
        src = (source / f'{name}.cu').read_text()
        line = next(l for l in registry if f'({name},' in l)
        variants = [('', src)]
        if 'mbarrier_arrive_cluster' in src:
            variants += [('_cta', cta(src)), ('_nomc', nomc(src))]
        for suffix, text in variants:
            (target / f'{name}{suffix}.cu').write_text(text.replace(name, name + suffix))
            rows.append(line.replace(f'({name},', f'({name}{suffix},'))
            sets.append(f'clusters {name}{suffix}')
    (target / 'registry.inc').write_text('\n'.join(rows) + '\n')
    (target / 'sets.txt').write_text('\n'.join(sets) + '\n')
    (target / 'commit').write_text((source / 'commit').read_text())


main()
