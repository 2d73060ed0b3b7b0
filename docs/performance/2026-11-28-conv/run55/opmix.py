# Counts the executed warp-instructions of an Nsight Compute source page (ncu -i R --page source --csv
# --print-source sass) by opcode, with their stall samples: python3 opmix.py page.csv
import csv,sys,collections
rows=list(csv.reader(open(sys.argv[1])))
hdr=rows[1]; ix={h:i for i,h in enumerate(hdr)}
c=collections.Counter(); s=collections.Counter(); n=0
for r in rows[2:]:
    src=r[ix['Source']].strip()
    op=src.split()[0] if not src.startswith('@') else src.split()[1]
    op=op.split('.')[0]
    e=int(r[ix['Instructions Executed']] or 0)
    c[op]+=e; s[op]+=int(r[ix['Warp Stall Sampling (All Samples)']] or 0); n+=1
tot=sum(c.values())
print('static instructions',n,'executed warp-instructions',tot)
for op,v in c.most_common(15): print(f'{op:10s} {v:9d} {100*v/tot:5.1f}%  samples {s[op]}')
