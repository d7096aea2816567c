# Warp stall samples and shared-memory bank conflicts from an Nsight Compute source page
# (`ncu --import R --page source --csv --print-source sass > F.csv`): python3 stalls.py F.csv
import csv, sys, collections
rows=list(csv.reader(open(sys.argv[1])))
h=rows[1]; data=rows[2:]
ix={n:i for i,n in enumerate(h)}
def num(x):
    try: return float(x.replace(',',''))
    except: return 0.0
tot=collections.Counter()
per=[]
for r in data:
    if len(r)<len(h): continue
    s=num(r[ix['Warp Stall Sampling (All Samples)']])
    for n in h:
        if n.startswith('stall_') and '(Not' not in n: tot[n]+=num(r[ix[n]])
    per.append((s,r[ix['Source']].strip(), r[ix['L1 Wavefronts Shared Excessive']], r[ix['Address']]))
T=sum(tot.values())
print('total samples',T)
for n,v in tot.most_common(10): print(f'{n:24s} {v/T:.3f}')
per.sort(reverse=True)
for s,src,ex,a in per[:25]: print(f'{s/T:.3f} {a[-5:]} {src[:70]} excessive={ex}')
print('shared excessive wavefronts', sum(num(r[ix['L1 Wavefronts Shared Excessive']]) for r in data if len(r)>=len(h)), 'of', sum(num(r[ix['L1 Wavefronts Shared']]) for r in data if len(r)>=len(h)))
