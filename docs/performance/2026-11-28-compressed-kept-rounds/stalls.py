# Summarises an Nsight Compute source page (ncu -i R --page source --csv --print-source sass):
# stall reasons over all samples, then the 40 instructions with the most samples.
import csv,sys,collections
f=sys.argv[1]
rows=list(csv.reader(open(f)))
hdr=rows[1]; data=rows[2:]
ix={h:i for i,h in enumerate(hdr)}
stalls=[h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
tot=collections.Counter(); allsamp=0
for r in data:
    for s in stalls:
        try: tot[s]+=int(r[ix[s]])
        except: pass
    allsamp+=int(r[ix['Warp Stall Sampling (All Samples)']] or 0)
print('total samples',allsamp)
for s,v in tot.most_common(12): print(f'{s:28s} {v:8d} {100*v/allsamp:5.1f}%')
# top instructions
data.sort(key=lambda r:-int(r[ix['Warp Stall Sampling (All Samples)']] or 0))
print()
for r in data[:40]:
    top=sorted(((int(r[ix[s]] or 0),s) for s in stalls),reverse=True)[:3]
    print(f"{r[ix['Address']][-5:]} {int(r[ix['Warp Stall Sampling (All Samples)']]):7d} {r[ix['Source']].strip()[:60]:60s} {r[ix['Instructions Executed']]:>9s} ", ' '.join(f'{s[6:]}:{v}' for v,s in top))
