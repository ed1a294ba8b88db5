"""Train the EP and MHCA heads of the 12_viz gallery on the real ImageNet EfficientNet-Lite0 (7x7 x 1280 tokens).

Run from the repository root (about 10 minutes on 2 busy CPU cores):
    python nbs/data/scripts/viz/lite0_heads.py
Writes nbs/data/viz/lite0_{ep,ep8,mhca}.{safetensors,json} and lite0_results.csv.

Data (all offline, from installed wheels): the 20 ImageNet photos of the foolbox wheel. Labels are the
frozen encoder's own ImageNet classifier's top-1 on each view (distillation of its decisions): 24 random
resized crops + flips per photo for training, the eval centre crops for validation. The heads' classes are
the ImageNet indices that occur among those labels (listed as `classes` in the head json)."""
import importlib.metadata as md, sys, time
import pandas as pd
from pathlib import Path
import torch, torchvision.transforms as T
from PIL import Image
sys.path.insert(0, str(Path(__file__).resolve().parents[4]))       # the repository root
from ep_probing.encoders import create_encoder
from ep_probing.fit import probe_learner
from ep_probing.heads import save_head
from ep_probing.engine import fit_learner, SeedEpoch, warmup_cosine
from fastai.data.core import DataLoaders
from fastai.callback.schedule import ParamScheduler
from ep_probing.probes import n_params

out = Path(__file__).resolve().parents[2]/'viz'                           # nbs/data/viz
torch.manual_seed(0)
enc = create_encoder('efficientnet_lite0_imagenet')
photos = sorted(Path(md.distribution('foolbox').locate_file('foolbox/data')).glob('imagenet_*.jpg'))
ims = [Image.open(f).convert('RGB') for f in photos]
norm = [T.ToTensor(), T.Normalize(enc.mean, enc.std)]
aug = T.Compose([T.RandomResizedCrop(224, scale=(0.2, 1.)), T.RandomHorizontalFlip(), *norm])
train_x = torch.stack([aug(im) for im in ims for _ in range(24)])             # (480, 3, 224, 224)
val_x = torch.stack([enc.transform()(im) for im in ims])                      # (20, 3, 224, 224)

def tokens(x, bs=64):
    "Patch tokens `(B, 49, 1280)` and the frozen ImageNet classifier's top-1"
    ps, ys = [], []
    for i in range(0, len(x), bs):
        p, _ = enc(x[i:i + bs])
        ps.append(p); ys.append(enc.model.classifier(p.mean(1)).argmax(-1))   # GAP + ImageNet classifier: lite0's head
    return torch.cat(ps), torch.cat(ys)

t0 = time.time()
tp, ty = tokens(train_x); vp, vy = tokens(val_x)
print(f'tokens: {time.time() - t0:.0f} s', flush=True)
classes = sorted(set(ty.tolist()) | set(vy.tolist()))
remap = {c: i for i, c in enumerate(classes)}
y_tr, y_val = (torch.tensor([remap[int(c)] for c in y]) for y in (ty, vy))
true = [int(f.stem.split('_')[-1]) for f in photos]
meta = dict(encoder='efficientnet_lite0_imagenet', layer=-1, classes=classes,
            data='foolbox ImageNet photos, 24 random-resized crops each; labels: the frozen lite0 classifier top-1',
            command='python nbs/data/scripts/viz/lite0_heads.py',
            teacher_top1_vs_filename=sum(int(a == b) for a, b in zip(vy.tolist(), true)) / 20)
# Trained with fastai through `probe_learner` + `fit_learner`, to the last epoch: the 20 validation crops saturate after
# one epoch, so keeping the best epoch (as fit_probes does) would keep heads whose attention has not moved from its
# (uniform) initialisation. AdamW (weight decay 0.05), 10% warm-up then half-cosine from 3e-3, batch 64, seed 0.
dls = DataLoaders.from_dsets(list(zip(tp[:, None], tp.new_zeros(len(tp), 1, 0, 1280), y_tr)),
                             list(zip(vp[:, None], vp.new_zeros(len(vp), 1, 0, 1280), y_val)), bs=64, shuffle=True)
rows = []
for name, spec, epochs in [('ep', 'ep', 40), ('ep8', 'ep:num_queries=8', 40), ('mhca', 'mhca', 12)]:
    torch.manual_seed(0)
    learn = probe_learner(dls, [spec], len(classes), 1280, layer_order=[0], depth=1, opt='adamw', lr=3e-3, wd=0.05)
    t0 = time.time()
    sched = ParamScheduler({'lr': warmup_cosine(learn.lr, 0.1)})             # the heads' peak rates, one per probe
    fit_learner(learn, epochs, [SeedEpoch(0), sched], precision='none', progress=False)   # fp32, as committed
    p = next(iter(learn.model.probes.values())).eval()
    with torch.no_grad(): acc = (p(vp).argmax(-1) == y_val).float().mean().item()
    rows.append(dict(probe=name, epochs=epochs, params=n_params(p), final_train_loss=float(learn.recorder.losses[-1]),
                     val_top1=acc, train_s=time.time() - t0))
    print(rows[-1], flush=True)
    save_head(p, out/f'lite0_{name}', val_top1=acc, epochs=epochs, **meta)
pd.DataFrame(rows).set_index('probe').assign(classes=len(classes), train_views=len(tp)).to_csv(out/'lite0_results.csv')
