"""JPEG decoding at ViT-B shapes, PIL in DataLoader workers against torchvision's `decode_jpeg` (GPU check step decode;
it runs on the CPU too, small, as the test suite runs it).
  python tests/gpu_decode.py OUT [--device cuda] [--n 1024] [--bs 128] [--workers 8] [--model vit_base_patch16_224]
An ImageNet-like folder of real JPEG files (`bench_train.fake_imagenet`: about 400 x 350 px, 110 KB) and the model's
eval transform (ViT-B/16: resize 248 bicubic, center crop 224, normalise). Measured, images/s: `pil` (workers decode
and transform with PIL: the `--decode cpu` path), `bytes_cpu` (workers read bytes, `decode_jpeg` and the tensor ops on
the CPU in the main process), `bytes_gpu` (the same with the decoding and the ops on the GPU: `--decode auto` on
CUDA; CUDA only); then extraction (`extract_features`, random weights) with `pil` and with `bytes_<device>`, and the
two caches' tokens compared. Writes OUT/decode.json and prints the rates and ratios."""
import argparse, json, os, tempfile, time
from pathlib import Path
import numpy as np, torch
from torch.utils.data import DataLoader

def rate(a, dl, f)->float:
    "Images/s of a pass over `dl` with `f(batch)` applied (on CUDA, synchronised)"
    n, t = 0, time.perf_counter()
    for x, y in dl: f(x); n += len(y)
    if a.device.startswith('cuda'): torch.cuda.synchronize()
    return n / (time.perf_counter() - t)

def main(a)->dict:
    from ep_probing.bench_train import fake_imagenet
    from ep_probing.cache import extract_features, _Transformed
    from ep_probing.data import image_folder, jpeg_source, JpegFiles
    from ep_probing.encoders import create_encoder, timm_model
    work = Path(a.work or tempfile.mkdtemp())
    ds = image_folder(fake_imagenet(work/'fi', a.n)/'train', channels=3)
    torch.manual_seed(0)
    enc = create_encoder(timm_model(a.model, pretrained=False, num_classes=0), precision='auto', device=a.device)
    tf = enc.transform()
    mk = lambda d, tf_, coll=None: DataLoader(_Transformed(d, tf_, range(len(d))), batch_size=a.bs,
                                              num_workers=a.workers, collate_fn=coll,
                                              persistent_workers=a.workers > 0, pin_memory=a.device.startswith('cuda'))
    devs = ['cpu'] + ([a.device] if a.device.startswith('cuda') else [])
    rates = {'pil': rate(a, mk(ds, tf), lambda x: x.to(a.device, non_blocking=True))}
    for d in devs:
        src, jt = jpeg_source(ds, tf, d)
        rates[f'bytes_{torch.device(d).type}'] = rate(a, mk(src, None, JpegFiles.collate), jt.batch)
    ext, tokens = {}, {}
    for how, dev in [('pil', None)] + [(f'bytes_{torch.device(d).type}', d) for d in devs[-1:]]:
        t = time.perf_counter()
        c = extract_features(enc, ds, work/'cache', tf, batch_size=a.bs, shard_size=a.n, num_workers=a.workers,
                             progress=False, jpeg_device=dev)
        ext[how] = len(ds) / (time.perf_counter() - t)
        tokens[how] = c.get_batch(np.arange(min(len(c), 64)))[0].float()
    (k0, t0), (k1, t1) = tokens.items()
    rec = dict(decode_images_per_s=rates, extraction_images_per_s=ext,
               tokens_rel_diff=float((t1 - t0).norm() / t0.norm()), compared=[k0, k1],
               ratios={k: v / rates['pil'] for k, v in rates.items()}, n=len(ds), bs=a.bs, workers=a.workers,
               model=a.model, transform=repr(tf), device=a.device, torch=torch.__version__,
               device_name=torch.cuda.get_device_name(a.device) if a.device.startswith('cuda') else 'cpu',
               cpus=os.cpu_count(), load_average=os.getloadavg())
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out)/'decode.json').write_text(json.dumps(rec, indent=1) + '\n')
    print('decode + transform, images/s: ' + ', '.join(f'{k} {v:,.1f} (x{v / rates["pil"]:.2f})'
                                                        for k, v in rates.items()))
    print('extraction, images/s: ' + ', '.join(f'{k} {v:,.1f}' for k, v in ext.items()) +
          f"; tokens {k1} vs {k0}: relative difference {rec['tokens_rel_diff']:.2e}")
    return rec

if __name__ == '__main__':
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('out', help='the results folder (decode.json)')
    p.add_argument('--device', default='cuda')
    p.add_argument('--n', type=int, default=1024, help='training images in the fake ImageNet folder')
    p.add_argument('--bs', type=int, default=128)
    p.add_argument('--workers', type=int, default=8)
    p.add_argument('--model', default='vit_base_patch16_224')
    p.add_argument('--work', default=None, help='where the images and caches go (default: a temporary folder)')
    main(p.parse_args())
