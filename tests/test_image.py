"""tv.image (TF 1.x's tf.image): resizes against per-pixel NumPy references written from TF's
kernels (resize_bilinear_op.cc, resize_nearest_neighbor_op.cc, resize_bicubic_op.cc,
resize_area_op.cc), their gradients against central differences, colour spaces against the
standard library's colorsys, adjustments and dtype conversions against NumPy formulas, and the
codecs against Pillow and round trips; every bad input with its error."""
from __future__ import annotations

import colorsys
import io
import math
import re

import numpy as np
import pytest
from PIL import Image

import tensorvm as tv
from tests.opcheck import check_gradients

F32 = np.float32
RS = np.random.RandomState(7)
IMG = RS.rand(2, 5, 7, 3).astype(F32)
U8 = RS.randint(0, 256, (5, 7, 3)).astype(np.uint8)
SIZES = [(3, 4), (9, 11), (1, 1), (10, 3)]
MODES = [(False, False), (True, False), (False, True)]


def run(t, feed=None):
    with tv.Session() as s:
        return s.run(t, feed)


# ---- per-pixel references of TF's resize kernels ------------------------------------------------

def scale_of(n_in, n_out, ac):
    return F32(n_in - 1) / F32(n_out - 1) if ac and n_out > 1 else F32(n_in) / F32(n_out)


def src_pos(i, scale, hp):
    return (F32(i) + F32(0.5)) * scale - F32(0.5) if hp else F32(i) * scale


def ref_bilinear(x, size, ac, hp):
    n, h, w, c = x.shape
    oh, ow = size
    sy, sx = scale_of(h, oh, ac), scale_of(w, ow, ac)
    out = np.zeros((n, oh, ow, c), F32)
    for y in range(oh):
        fy = src_pos(y, sy, hp)
        y0, y1, ly = max(int(math.floor(fy)), 0), min(int(math.ceil(fy)), h - 1), \
            F32(fy - F32(math.floor(fy)))
        for xx in range(ow):
            fx = src_pos(xx, sx, hp)
            x0, x1, lx = max(int(math.floor(fx)), 0), min(int(math.ceil(fx)), w - 1), \
                F32(fx - F32(math.floor(fx)))
            top = x[:, y0, x0] + (x[:, y0, x1] - x[:, y0, x0]) * lx
            bot = x[:, y1, x0] + (x[:, y1, x1] - x[:, y1, x0]) * lx
            out[:, y, xx] = top + (bot - top) * ly
    return out


def ref_nearest(x, size, ac, hp):
    n, h, w, c = x.shape
    sy, sx = scale_of(h, size[0], ac), scale_of(w, size[1], ac)

    def pick(i, scale, n_in):
        p = (F32(i) + F32(0.5)) * scale if hp else F32(i) * scale
        j = int(math.floor(p + 0.5)) if ac else int(math.floor(p))
        return min(max(j, 0), n_in - 1)
    rows = [pick(i, sy, h) for i in range(size[0])]
    cols = [pick(i, sx, w) for i in range(size[1])]
    return x[:, rows][:, :, cols]


def cubic_weight(d, a):
    d = abs(d)
    if d <= 1:
        return ((a + 2) * d - (a + 3)) * d * d + 1
    if d < 2:
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return 0.0


def ref_bicubic(x, size, ac, hp):
    """Keys' cubic convolution (a = -0.5 with half-pixel centres, out-of-image taps dropped and
    the rest renormalised; a = -0.75 legacy, edge pixels repeated); TF quantises the tap offset
    to 1/1024, so the reference does too."""
    n, h, w, c = x.shape
    a = -0.5 if hp else -0.75

    def taps(i, scale, n_in):
        p = src_pos(i, scale, hp)
        base = math.floor(p)
        t = round((p - base) * 1024) / 1024
        idx = [base + k for k in (-1, 0, 1, 2)]
        wts = [cubic_weight(t - k, a) for k in (-1, 0, 1, 2)]
        if hp:
            wts = [wt if 0 <= j < n_in else 0.0 for wt, j in zip(wts, idx)]
            s = sum(wts)
            wts = [wt / s for wt in wts]
        return [min(max(j, 0), n_in - 1) for j in idx], wts
    out = np.zeros((n, size[0], size[1], c))
    sy, sx = scale_of(h, size[0], ac), scale_of(w, size[1], ac)
    for y in range(size[0]):
        iy, wy = taps(y, sy, h)
        for xx in range(size[1]):
            ix, wx = taps(xx, sx, w)
            for a_, j in zip(wy, iy):
                for b_, k in zip(wx, ix):
                    out[:, y, xx] += a_ * b_ * x[:, j, k]
    return out


def ref_area(x, size, ac):
    n, h, w, c = x.shape
    sy, sx = float(scale_of(h, size[0], ac)), float(scale_of(w, size[1], ac))

    def cover(o, scale, n_in):
        lo, hi = o * scale, (o + 1) * scale
        res = {}
        for i in range(int(math.floor(lo)), int(math.ceil(hi))):
            part = min(i + 1, hi) - max(i, lo)
            res[min(i, n_in - 1)] = res.get(min(i, n_in - 1), 0) + part
        return res
    out = np.zeros((n, size[0], size[1], c))
    for y in range(size[0]):
        for xx in range(size[1]):
            for j, wy in cover(y, sy, h).items():
                for k, wx in cover(xx, sx, w).items():
                    out[:, y, xx] += wy * wx * x[:, j, k]
    return out / (sy * sx)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("ac,hp", MODES)
def test_resize_bilinear_nearest_bicubic_match_tf_kernels(size, ac, hp):
    x = tv.constant(IMG)
    got = run([tv.image.resize_bilinear(x, size, align_corners=ac, half_pixel_centers=hp),
               tv.image.resize_nearest_neighbor(x, size, align_corners=ac,
                                                half_pixel_centers=hp),
               tv.image.resize_bicubic(x, size, align_corners=ac, half_pixel_centers=hp)])
    np.testing.assert_allclose(got[0], ref_bilinear(IMG, size, ac, hp), rtol=0, atol=2e-6)
    np.testing.assert_array_equal(got[1], ref_nearest(IMG, size, ac, hp))
    np.testing.assert_allclose(got[2], ref_bicubic(IMG, size, ac, hp), rtol=0, atol=1e-5)
    assert [g.dtype for g in got] == [np.float32] * 3


@pytest.mark.parametrize("size", SIZES + [(5, 7)])
@pytest.mark.parametrize("ac", [False, True])
def test_resize_area_matches_box_average(size, ac):
    got = run(tv.image.resize_area(IMG, size, align_corners=ac))
    np.testing.assert_allclose(got, ref_area(IMG.astype(np.float64), size, ac), atol=2e-6)


def test_resize_keeps_integer_dtypes_as_tf_does():
    imgs = tv.constant(U8[None])
    bil, nn = run([tv.image.resize_bilinear(imgs, [3, 3]),
                   tv.image.resize_nearest_neighbor(imgs, [3, 3])])
    assert bil.dtype == np.float32 and nn.dtype == np.uint8
    np.testing.assert_allclose(bil, ref_bilinear(U8[None].astype(F32), (3, 3), False, False),
                               atol=1e-4)
    np.testing.assert_array_equal(nn, ref_nearest(U8[None], (3, 3), False, False))


@pytest.mark.parametrize("method", ["bilinear", "nearest", "bicubic", "area"])
@pytest.mark.parametrize("size,hp", [((3, 4), False), ((8, 9), False), ((4, 9), True)])
def test_resize_gradients_numeric(method, size, hp):
    fn = {"bilinear": tv.image.resize_bilinear, "nearest": tv.image.resize_nearest_neighbor,
          "bicubic": tv.image.resize_bicubic, "area": tv.image.resize_area}[method]
    kw = {} if method == "area" else {"half_pixel_centers": hp}
    x = RS.rand(1, 5, 6, 2)
    # the ops compute in float32 (TF's kernels), and are linear in the image: a wide step
    # gives the exact slope up to float32 rounding
    check_gradients(lambda t: fn(t, size, **kw), x, eps=1e-2, rtol=2e-3, atol=2e-4)


def test_resize_with_a_size_computed_in_the_graph():
    x = tv.placeholder(tv.float32, [None, None, None, 3])
    size = tv.shape(x)[1:3] * 2
    y = tv.image.resize_nearest_neighbor(x, size)
    got = run(y, {x: IMG})
    np.testing.assert_array_equal(got, IMG.repeat(2, 1).repeat(2, 2))


def test_resize_images_v1_front_end():
    x3 = IMG[0]
    same, up, pr, by_name = run([
        tv.image.resize_images(tv.constant(U8), [5, 7]),
        tv.image.resize_images(x3, [10, 14], method=tv.image.ResizeMethod.NEAREST_NEIGHBOR),
        tv.image.resize_images(x3, [10, 10], preserve_aspect_ratio=True),
        tv.image.resize(x3, [3, 3], method="area")])
    assert same.dtype == np.uint8 and (same == U8).all()  # TF returns it unresized
    np.testing.assert_array_equal(up, x3.repeat(2, 0).repeat(2, 1))
    # 5x7 into 10x10 keeping the aspect: scale min(10/5, 10/7) -> 7x10
    assert pr.shape == (7, 10, 3)
    np.testing.assert_allclose(pr, ref_bilinear(IMG[:1], (7, 10), False, False)[0], atol=2e-6)
    np.testing.assert_allclose(by_name, ref_area(IMG[:1].astype(np.float64), (3, 3),
                                                 False)[0], atol=2e-6)


def test_resize_errors():
    with pytest.raises(ValueError, match="must have 3 or 4 dimensions"):
        tv.image.resize_images(np.zeros((4, 4), F32), [2, 2])
    with pytest.raises(ValueError, match="1-D Tensor of 2 elements"):
        tv.image.resize_images(IMG, [2, 2, 2])
    with pytest.raises(ValueError, match="Resize method is not implemented"):
        tv.image.resize_images(IMG, [2, 2], method=9)
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match="if half_pixel_centers is True, align_corners must be False"):
        tv.image.resize_bilinear(IMG, [2, 2], align_corners=True, half_pixel_centers=True)
    with pytest.raises(tv.errors.InvalidArgumentError, match="output dimensions must be positive"):
        tv.image.resize_bilinear(IMG, [0, 2])
    with pytest.raises(tv.errors.InvalidArgumentError, match="real number type"):
        tv.image.resize_bilinear(tv.constant([[[[True]]]]), [2, 2])
    size = tv.placeholder(tv.int32, [2])
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"output dimensions must be positive, got \[-1, 2\]"):
        run(tv.image.resize_bilinear(IMG, size), {size: [-1, 2]})


# ---- crops, pads, flips -------------------------------------------------------------------------

def test_crop_pad_and_central_crop_equal_numpy_slicing():
    crop, padded, central, cp, cp_batch = run([
        tv.image.crop_to_bounding_box(U8, 1, 2, 3, 4),
        tv.image.pad_to_bounding_box(U8, 2, 1, 9, 10),
        tv.image.central_crop(U8, 0.6),
        tv.image.resize_image_with_crop_or_pad(U8, 3, 11),
        tv.image.resize_image_with_crop_or_pad(np.stack([U8, U8]), 8, 4)])
    np.testing.assert_array_equal(crop, U8[1:4, 2:6])
    want = np.zeros((9, 10, 3), np.uint8)
    want[2:7, 1:8] = U8
    np.testing.assert_array_equal(padded, want)
    # TF: start = int((n - n * f) / 2) per axis
    sh, sw = int((5 - 5 * 0.6) / 2), int((7 - 7 * 0.6) / 2)
    np.testing.assert_array_equal(central, U8[sh:5 - sh, sw:7 - sw])
    want = np.zeros((3, 11, 3), np.uint8)
    want[:, 2:9] = U8[1:4]
    np.testing.assert_array_equal(cp, want)
    want = np.zeros((2, 8, 4, 3), np.uint8)
    want[:, 1:6] = U8[:, 1:5]
    np.testing.assert_array_equal(cp_batch, want)


def test_crop_and_pad_with_offsets_computed_in_the_graph():
    oh = tv.placeholder(tv.int32, [])
    got = run([tv.image.crop_to_bounding_box(U8, oh, 1, 2, 3),
               tv.image.pad_to_bounding_box(U8, oh, 0, 8, 7)], {oh: 2})
    np.testing.assert_array_equal(got[0], U8[2:4, 1:4])
    np.testing.assert_array_equal(got[1][2:7], U8)
    assert got[1].shape == (8, 7, 3) and not got[1][:2].any()


@pytest.mark.parametrize("call,msg", [
    (lambda: tv.image.crop_to_bounding_box(U8, -1, 0, 2, 2), "offset_height must be >= 0."),
    (lambda: tv.image.crop_to_bounding_box(U8, 0, 0, 0, 2), "target_height must be > 0."),
    (lambda: tv.image.crop_to_bounding_box(U8, 0, 6, 2, 2), "width must be >= target + offset."),
    (lambda: tv.image.crop_to_bounding_box(U8, 4, 0, 2, 2),
     "height must be >= target + offset."),
    (lambda: tv.image.pad_to_bounding_box(U8, 0, 0, 4, 9), "height must be <= target - offset"),
    (lambda: tv.image.pad_to_bounding_box(U8, 0, -2, 9, 9), "offset_width must be >= 0"),
    (lambda: tv.image.central_crop(U8, 0.0), "central_fraction must be within (0, 1]"),
    (lambda: tv.image.resize_image_with_crop_or_pad(U8, 0, 3), "target_height must be > 0."),
    (lambda: tv.image.flip_left_right(np.zeros((3, 3), np.uint8)),
     "must have 3 or 4 dimensions"),
    (lambda: tv.image.random_hue(U8, 0.7), "max_delta must be <= 0.5."),
    (lambda: tv.image.random_brightness(U8, -0.1), "max_delta must be non-negative."),
    (lambda: tv.image.random_contrast(U8, 0.9, 0.5), "upper must be > lower."),
    (lambda: tv.image.random_saturation(U8, -0.5, 0.5), "lower must be non-negative."),
    (lambda: tv.image.adjust_gamma(U8, -1), "Gamma should be a non-negative real number."),
    (lambda: tv.random_crop(U8, [6, 2, 3]), "need value.shape >= size"),
    (lambda: tv.random_crop(U8, [2, 2]), "one entry per dimension"),
])
def test_bad_geometry_is_refused_at_construction(call, msg):
    with pytest.raises(ValueError, match=re.escape(msg)):
        call()


def test_flips_transpose_and_rot90_equal_numpy():
    b = np.stack([U8, U8[::-1]])
    k = tv.placeholder(tv.int32, [])
    got = run([tv.image.flip_left_right(U8), tv.image.flip_up_down(b),
               tv.image.transpose_image(b)] + [tv.image.rot90(U8, n) for n in range(4)]
              + [tv.image.rot90(b, 1)], {k: 0})
    np.testing.assert_array_equal(got[0], U8[:, ::-1])
    np.testing.assert_array_equal(got[1], b[:, ::-1])
    np.testing.assert_array_equal(got[2], b.transpose(0, 2, 1, 3))
    for n in range(4):
        np.testing.assert_array_equal(got[3 + n], np.rot90(U8, n, axes=(0, 1)))
    np.testing.assert_array_equal(got[7], np.rot90(b, 1, axes=(1, 2)))
    rot = tv.image.rot90(U8, k)
    with tv.Session() as s:
        for n in range(-1, 6):
            np.testing.assert_array_equal(s.run(rot, {k: n}), np.rot90(U8, n, axes=(0, 1)))


def test_random_flips_flip_each_image_or_not():
    batch = np.stack([U8 + i for i in range(16)]).astype(np.uint8)
    tv.reset_default_graph()
    tv.set_random_seed(3)
    lr, ud, one = (tv.image.random_flip_left_right(batch), tv.image.random_flip_up_down(batch),
                   tv.image.random_flip_left_right(U8))
    seen = set()
    with tv.Session() as s:
        for _ in range(4):
            a, b, c = s.run([lr, ud, one])
            for i in range(16):
                f_lr = (a[i] == batch[i, :, ::-1]).all()
                assert f_lr or (a[i] == batch[i]).all()
                assert (b[i] == batch[i, ::-1]).all() or (b[i] == batch[i]).all()
                seen.add(bool(f_lr))
            assert (c == U8).all() or (c == U8[:, ::-1]).all()
    assert seen == {True, False}


def test_random_crop_is_a_window_of_the_value():
    tv.reset_default_graph()
    size = [3, 4, 3]
    crop = tv.random_crop(U8, size, seed=5)
    starts = set()
    with tv.Session() as s:
        for _ in range(12):
            got = s.run(crop)
            hits = [(i, j) for i in range(3) for j in range(4)
                    if (U8[i:i + 3, j:j + 4] == got).all()]
            assert hits, "the crop is not a window of the image"
            starts.add(hits[0])
    assert len(starts) > 1
    n = tv.placeholder(tv.int32, [])
    with pytest.raises(tv.errors.InvalidArgumentError, match="Need value.shape >= size"):
        run(tv.random_crop(U8, tv.stack([n, 2, 3])), {n: 9})


# ---- colour and dtype ---------------------------------------------------------------------------

def test_rgb_hsv_match_colorsys_and_round_trip():
    x = np.concatenate([IMG.reshape(-1, 3), [[0, 0, 0], [1, 1, 1], [0.5, 0.5, 0.5],
                                             [1, 0, 0], [0, 1, 0], [0, 0, 1]]]).astype(F32)
    hsv, back = run([tv.image.rgb_to_hsv(x), tv.image.hsv_to_rgb(tv.image.rgb_to_hsv(x))])
    want = np.array([colorsys.rgb_to_hsv(*p) for p in x.astype(np.float64)])
    np.testing.assert_allclose(hsv, want, atol=2e-6)
    np.testing.assert_allclose(back, x, atol=2e-6)
    with pytest.raises(tv.errors.InvalidArgumentError, match="images must be float"):
        tv.image.rgb_to_hsv(U8)
    with pytest.raises(tv.errors.InvalidArgumentError, match="last dimension must be 3"):
        tv.image.hsv_to_rgb(np.zeros((2, 4), F32))


def np_convert(x, dtype, saturate=False):
    src, dst = x.dtype, np.dtype(dtype)
    if src == dst:
        return x
    if src.kind in "iu" and dst.kind in "iu":
        smax, dmax = np.iinfo(src).max, np.iinfo(dst).max
        if smax > dmax:
            return (x.astype(np.int64) // ((int(smax) + 1) // (int(dmax) + 1))).astype(dst)
        return x.astype(dst) * dst.type((int(dmax) + 1) // (int(smax) + 1))
    if src.kind == "f" and dst.kind == "f":
        return x.astype(dst)
    if src.kind in "iu":
        return (x.astype(dst) * dst.type(1.0 / np.iinfo(src).max)).astype(dst)
    scaled = x * src.type(np.iinfo(dst).max + 0.5)
    if saturate:
        scaled = np.clip(scaled, np.iinfo(dst).min, np.iinfo(dst).max)
    return scaled.astype(dst)


@pytest.mark.parametrize("src,dst,sat", [("uint8", "float32", False), ("uint8", "uint16", False),
                                         ("uint16", "uint8", False), ("uint8", "int32", False),
                                         ("float32", "uint8", True), ("float32", "float64", False),
                                         ("int32", "uint8", False)])
def test_convert_image_dtype(src, dst, sat):
    if src.startswith("float"):
        x = (RS.rand(4, 5, 3) * 1.3 - 0.1).astype(src)
    else:
        x = RS.randint(0, np.iinfo(src).max, (4, 5, 3), dtype=np.int64).astype(src)
    got = run(tv.image.convert_image_dtype(x, dst, saturate=sat))
    want = np_convert(x, dst, sat)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-6)


def test_adjustments_equal_numpy_formulas():
    f = U8.astype(F32) / F32(255)

    def back(v):
        return np.clip(v * F32(255.5), 0, 255).astype(np.uint8)
    bri, con, gam, std, grey, g2rgb = run([
        tv.image.adjust_brightness(U8, 0.2), tv.image.adjust_contrast(U8, 1.7),
        tv.image.adjust_gamma(U8, 1.5, 1.2), tv.image.per_image_standardization(U8),
        tv.image.rgb_to_grayscale(U8), tv.image.grayscale_to_rgb(U8[..., :1])])
    np.testing.assert_array_equal(bri, back(f + F32(0.2)))
    mean = f.mean(axis=(0, 1), keepdims=True)
    np.testing.assert_allclose(con.astype(int), back((f - mean) * F32(1.7) + mean), atol=1)
    np.testing.assert_allclose(gam.astype(int), back(F32(1.2) * f ** F32(1.5)), atol=1)
    x = U8.astype(np.float64)
    np.testing.assert_allclose(std, (x - x.mean()) / max(x.std(), 1 / math.sqrt(x.size)),
                               rtol=1e-5, atol=1e-5)
    w = np.array([0.2989, 0.5870, 0.1140], F32)
    np.testing.assert_allclose(grey[..., 0].astype(int), ((f * w).sum(-1) * 255.5).astype(int),
                               atol=1)
    np.testing.assert_array_equal(g2rgb, U8[..., :1].repeat(3, -1))


def test_hue_and_saturation_follow_colorsys():
    hue, sat = run([tv.image.adjust_hue(IMG, 0.3), tv.image.adjust_saturation(IMG, 0.4)])
    for (i, j, k) in [(0, 0, 0), (1, 3, 4), (0, 4, 6)]:
        h, s, v = colorsys.rgb_to_hsv(*IMG[i, j, k].astype(np.float64))
        np.testing.assert_allclose(hue[i, j, k], colorsys.hsv_to_rgb((h + 0.3) % 1, s, v),
                                   atol=1e-5)
        np.testing.assert_allclose(sat[i, j, k], colorsys.hsv_to_rgb(h, min(s * 0.4, 1), v),
                                   atol=1e-5)


def test_colour_adjustments_have_gradients():
    x = RS.rand(3, 4, 3) * 0.8 + 0.1
    check_gradients(lambda t: tv.image.adjust_contrast(t, 1.7), x)
    check_gradients(lambda t: tv.image.per_image_standardization(t), x)
    check_gradients(lambda t: tv.image.total_variation(t), x)


def test_statistics_equal_numpy():
    x = IMG.astype(np.float64)
    tot, (dy, dx), p = run([tv.image.total_variation(IMG), tv.image.image_gradients(IMG),
                            tv.image.psnr(U8, U8[::-1], 255)])
    want = (np.abs(np.diff(x, axis=1)).sum((1, 2, 3)) + np.abs(np.diff(x, axis=2)).sum((1, 2, 3)))
    np.testing.assert_allclose(tot, want, rtol=1e-5)
    np.testing.assert_allclose(dy[:, :-1], np.diff(IMG, axis=1), atol=1e-7)
    assert not dy[:, -1].any() and not dx[:, :, -1].any()
    np.testing.assert_allclose(dx[:, :, :-1], np.diff(IMG, axis=2), atol=1e-7)
    mse = ((U8.astype(np.float64) - U8[::-1]) ** 2).mean()
    np.testing.assert_allclose(p, 10 * np.log10(255.0 ** 2 / mse), rtol=1e-4)


# ---- codecs -------------------------------------------------------------------------------------

def pil_bytes(arr, fmt, **kw):
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format=fmt, **kw)
    return buf.getvalue()


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_png_round_trip_and_channel_conversions(channels):
    img = RS.randint(0, 256, (6, 5, channels)).astype(np.uint8)
    png = run(tv.image.encode_png(img))
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    got = run([tv.image.decode_png(png)] + [tv.image.decode_png(png, channels=c)
                                            for c in (1, 3, 4)])
    np.testing.assert_array_equal(got[0], img)
    if channels >= 3:
        r, g, b = (img[..., i].astype(np.int64) for i in range(3))
        grey = np.where((r == g) & (g == b), r, (9797 * r + 19234 * g + 3737 * b) >> 15)
        np.testing.assert_array_equal(got[1][..., 0], grey)
    else:
        np.testing.assert_array_equal(got[1][..., 0], img[..., 0])
    rgb = img[..., :3] if channels >= 3 else img[..., :1].repeat(3, -1)
    np.testing.assert_array_equal(got[2], rgb)
    alpha = img[..., -1:] if channels in (2, 4) else np.full((6, 5, 1), 255, np.uint8)
    np.testing.assert_array_equal(got[3], np.concatenate([rgb, alpha], -1))


def test_png_16_bit_and_palette():
    deep = RS.randint(0, 65536, (4, 3, 1)).astype(np.uint16)
    png16 = run(tv.image.encode_png(deep))
    pal = Image.fromarray(RS.randint(0, 256, (4, 3, 3)).astype(np.uint8)).convert("P")
    buf = io.BytesIO()
    pal.save(buf, format="PNG")
    got16, got8, from_pal = run([tv.image.decode_png(png16, dtype=tv.uint16),
                                 tv.image.decode_png(png16), tv.image.decode_png(buf.getvalue())])
    np.testing.assert_array_equal(got16, deep)
    np.testing.assert_array_equal(got8, (deep >> 8).astype(np.uint8))
    np.testing.assert_array_equal(from_pal, np.asarray(pal.convert("RGB")))


def test_jpeg_decode_equals_libjpeg_and_round_trips():
    img = (np.linspace(0, 255, 16 * 24 * 3).reshape(16, 24, 3)).astype(np.uint8)
    jpg = run(tv.image.encode_jpeg(img, quality=95))
    dec, half, grey, shape = run([tv.image.decode_jpeg(jpg), tv.image.decode_jpeg(jpg, ratio=2),
                                  tv.image.decode_jpeg(jpg, channels=1),
                                  tv.image.extract_jpeg_shape(jpg)])
    np.testing.assert_array_equal(dec, np.asarray(Image.open(io.BytesIO(jpg)).convert("RGB")))
    assert np.abs(dec.astype(int) - img).mean() < 3
    assert half.shape == (8, 12, 3) and grey.shape == (16, 24, 1)
    assert shape.tolist() == [16, 24, 3]
    luma = img.astype(np.float64) @ [0.299, 0.587, 0.114]
    assert np.abs(grey[..., 0] - luma).mean() < 3


def test_decode_image_sniffs_the_format():
    frames = [Image.fromarray(np.full((4, 6, 3), v, np.uint8)) for v in (0, 120, 240)]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:])
    gif = buf.getvalue()
    bmp = pil_bytes(U8, "BMP")
    png = pil_bytes(U8, "PNG")
    contents = tv.placeholder(tv.string, [])
    anim = tv.image.decode_image(contents)
    still = tv.image.decode_image(contents, expand_animations=False)
    as_float = tv.image.decode_image(contents, dtype=tv.float32)
    with tv.Session() as s:
        g = s.run(anim, {contents: gif})
        assert g.shape == (3, 4, 6, 3) and [int(f.mean()) for f in g] == [0, 120, 240]
        assert s.run(still, {contents: gif}).shape == (4, 6, 3)
        np.testing.assert_array_equal(s.run(anim, {contents: bmp}), U8)
        np.testing.assert_array_equal(s.run(anim, {contents: png}), U8)
        np.testing.assert_allclose(s.run(as_float, {contents: png}), U8 / 255.0, rtol=1e-6)
        np.testing.assert_array_equal(s.run(tv.image.decode_gif(gif)), g)
        np.testing.assert_array_equal(s.run(tv.image.decode_bmp(bmp)), U8)
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match="unknown image file format.*one of JPEG, PNG, GIF, BMP"):
            s.run(anim, {contents: b"not an image"})


def test_codec_errors_name_the_op_and_format():
    png = pil_bytes(U8, "PNG")
    jpg = pil_bytes(U8, "JPEG")
    contents = tv.placeholder(tv.string, [])
    with tv.Session() as s:
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match="DecodePng: the contents are not a PNG image"):
            s.run(tv.image.decode_png(contents), {contents: jpg})
        with pytest.raises(tv.errors.InvalidArgumentError, match="DecodeJpeg: invalid JPEG"):
            s.run(tv.image.decode_jpeg(contents), {contents: jpg[:20]})
        with pytest.raises(tv.errors.InvalidArgumentError, match="DecodeJpeg: channels must be"):
            s.run(tv.image.decode_jpeg(contents, channels=2), {contents: jpg})
        with pytest.raises(tv.errors.InvalidArgumentError, match="ratio must be 1, 2, 4 or 8"):
            s.run(tv.image.decode_jpeg(contents, ratio=3), {contents: jpg})
        np.testing.assert_array_equal(s.run(tv.image.decode_png(contents), {contents: png}), U8)
    with pytest.raises(tv.errors.InvalidArgumentError, match="EncodePng: image must be uint8 "
                                                             "or uint16, got float32"):
        tv.image.encode_png(IMG[0])
    with pytest.raises(tv.errors.InvalidArgumentError, match="EncodeJpeg: image must be"):
        tv.image.encode_jpeg(np.zeros((3, 3, 2), np.uint8))
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=re.escape("DecodePng: contents must be a scalar string, got shape "
                                       "[2]")):
        tv.image.decode_png([png, png])
    with pytest.raises(tv.errors.InvalidArgumentError, match="dtype must be uint8 or uint16"):
        tv.image.decode_png(png, dtype=tv.float32)


def test_codecs_are_cpu_only_and_resizes_have_gpu_kernels():
    from tensorvm.framework.op_registry import get_op_def
    for op in ("DecodePng", "DecodeJpeg", "DecodeImage", "EncodePng", "EncodeJpeg"):
        assert "host memory" in get_op_def(op).cpu_only
    for op in ("ResizeBilinear", "ResizeBicubic", "ResizeNearestNeighbor", "ResizeArea",
               "ResizeBilinearGrad", "RGBToHSV", "HSVToRGB"):
        assert "GPU" in get_op_def(op).kernels


def test_an_input_pipeline_decodes_augments_and_batches():
    """The CIFAR-10 tutorial's preprocessing, on PNG records: decode, random crop, flip,
    brightness/contrast, standardise, batch."""
    imgs = [RS.randint(0, 256, (12, 12, 3)).astype(np.uint8) for _ in range(6)]
    records = [pil_bytes(i, "PNG") for i in imgs]
    tv.reset_default_graph()
    ds = tv.data.Dataset.from_tensor_slices(np.asarray(records, dtype=object))

    def prep(rec):
        img = tv.cast(tv.image.decode_png(rec, channels=3), tv.float32)
        img = tv.random_crop(img, [8, 8, 3])
        img = tv.image.random_flip_left_right(img)
        img = tv.image.random_brightness(img, max_delta=63)
        img = tv.image.random_contrast(img, lower=0.2, upper=1.8)
        return tv.image.per_image_standardization(img)
    batch = ds.map(prep).batch(3).make_one_shot_iterator().get_next()
    with tv.Session() as s:
        a, b = s.run(batch), s.run(batch)
    for out in (a, b):
        assert out.shape == (3, 8, 8, 3)
        np.testing.assert_allclose(out.mean(axis=(1, 2, 3)), 0, atol=1e-4)
        np.testing.assert_allclose(out.std(axis=(1, 2, 3)), 1, atol=1e-3)


# ---- linear colour spaces, edges, SSIM, boxes -----------------------------------------------------

def test_linear_colour_spaces_round_trip_and_luma():
    x = IMG
    yiq, yuv, back_yiq, back_yuv = run([
        tv.image.rgb_to_yiq(x), tv.image.rgb_to_yuv(x),
        tv.image.yiq_to_rgb(tv.image.rgb_to_yiq(x)), tv.image.yuv_to_rgb(tv.image.rgb_to_yuv(x))])
    luma = x @ np.array([0.299, 0.587, 0.114], F32)
    np.testing.assert_allclose(yiq[..., 0], luma, atol=1e-6)
    np.testing.assert_allclose(yuv[..., 0], luma, atol=1e-6)
    # TF's two matrices are inverse to 4 decimals (TF's round trip is off by as much)
    np.testing.assert_allclose(back_yiq, x, atol=2e-4)
    np.testing.assert_allclose(back_yuv, x, atol=2e-4)
    check_gradients(tv.image.rgb_to_yuv, RS.rand(2, 3, 3))


def test_sobel_edges_equal_a_reflect_padded_reference():
    x = RS.rand(1, 5, 6, 2)
    got = run(tv.image.sobel_edges(x))
    assert got.shape == (1, 5, 6, 2, 2)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), mode="reflect")
    ky = np.array([[-1, -2, -1], [0, 0, 0], [1, 2, 1]])
    for k, kern in enumerate((ky, ky.T)):
        want = sum(kern[i, j] * xp[:, i:i + 5, j:j + 6] for i in range(3) for j in range(3))
        np.testing.assert_allclose(got[..., k], want, atol=1e-12)


def np_ssim(a, b, max_val, size=11, sigma=1.5, k1=0.01, k2=0.03):
    """Per image: the mean over windows and channels of luminance x contrast-structure, each
    from Gaussian-weighted local moments over the full ('VALID') windows."""
    coords = np.arange(size) - (size - 1) / 2
    g1 = np.exp(-coords ** 2 / (2 * sigma ** 2))
    w = np.outer(g1, g1) / np.outer(g1, g1).sum()
    n, h, wd, c = a.shape
    oh, ow = h - size + 1, wd - size + 1

    def local(z):
        out = np.zeros((n, oh, ow, c))
        for i in range(size):
            for j in range(size):
                out += w[i, j] * z[:, i:i + oh, j:j + ow]
        return out
    c1, c2 = (k1 * max_val) ** 2, (k2 * max_val) ** 2
    ma, mb = local(a), local(b)
    lum = (2 * ma * mb + c1) / (ma ** 2 + mb ** 2 + c1)
    cs = (2 * (local(a * b) - ma * mb) + c2) / (local(a * a + b * b) - ma ** 2 - mb ** 2 + c2)
    return (lum * cs).mean((1, 2, 3))


def test_ssim_equals_its_definition():
    a = RS.rand(2, 14, 13, 3).astype(F32)
    b = np.clip(a + RS.randn(*a.shape).astype(F32) * 0.1, 0, 1)
    got, same = run([tv.image.ssim(a, b, 1.0), tv.image.ssim(a, a, 1.0)])
    np.testing.assert_allclose(got, np_ssim(a.astype(np.float64), b.astype(np.float64), 1.0),
                               rtol=1e-4)
    np.testing.assert_allclose(same, 1.0, rtol=1e-5)
    au, bu = (a * 255).astype(np.uint8), (b * 255).astype(np.uint8)
    got_u8 = run(tv.image.ssim(au, bu, 255, filter_size=5))
    np.testing.assert_allclose(got_u8, np_ssim(au / 255.0, bu / 255.0, 1.0, size=5), rtol=1e-4)
    with pytest.raises(ValueError, match="must be at least filter_size"):
        tv.image.ssim(a[:, :5], b[:, :5], 1.0)


def np_nms(boxes, scores, k, iou_t, score_t=-np.inf):
    y1, x1 = np.minimum(boxes[:, 0], boxes[:, 2]), np.minimum(boxes[:, 1], boxes[:, 3])
    y2, x2 = np.maximum(boxes[:, 0], boxes[:, 2]), np.maximum(boxes[:, 1], boxes[:, 3])
    area = (y2 - y1) * (x2 - x1)
    kept = []
    for i in sorted(range(len(scores)), key=lambda i: (-scores[i], i)):
        if scores[i] <= score_t or len(kept) == k:
            continue
        ok = True
        for j in kept:
            inter = max(0, min(y2[i], y2[j]) - max(y1[i], y1[j])) * \
                max(0, min(x2[i], x2[j]) - max(x1[i], x1[j]))
            if inter / (area[i] + area[j] - inter) > iou_t:
                ok = False
                break
        if ok:
            kept.append(i)
    return kept


@pytest.mark.parametrize("k,iou,st", [(10, 0.3, -np.inf), (50, 0.6, 0.3), (0, 0.5, -np.inf),
                                      (5, 1.0, -np.inf)])
def test_non_max_suppression_equals_greedy_reference(k, iou, st):
    boxes = RS.rand(40, 4).astype(F32)
    scores = RS.rand(40).astype(F32)
    got = run(tv.image.non_max_suppression(boxes, scores, k, iou, score_threshold=st))
    assert got.dtype == np.int32
    assert got.tolist() == np_nms(boxes, scores, k, iou, st)
    with pytest.raises(tv.errors.InvalidArgumentError, match="iou_threshold must be in"):
        run(tv.image.non_max_suppression(boxes, scores, 3, 1.5))


def test_sample_distorted_bounding_box_crops_cover_the_object():
    tv.reset_default_graph()
    box = np.array([[[0.3, 0.2, 0.7, 0.6]]], F32)
    begin, size, bbox = tv.image.sample_distorted_bounding_box(
        [60, 80, 3], box, seed=3, min_object_covered=0.5, aspect_ratio_range=(0.5, 2.0),
        area_range=(0.1, 0.9))
    img = tv.placeholder(tv.uint8, [60, 80, 3])
    crop = tv.slice(img, begin, size)
    pic = RS.randint(0, 255, (60, 80, 3)).astype(np.uint8)
    seen = set()
    with tv.Session() as s:
        for _ in range(8):
            b, sz, bb, c = s.run([begin, size, bbox, crop], {img: pic})
            h, w = int(sz[0]), int(sz[1])
            assert sz[2] == -1 and b[2] == 0 and c.shape == (h, w, 3)
            np.testing.assert_array_equal(c, pic[b[0]:b[0] + h, b[1]:b[1] + w])
            area = h * w / (60 * 80)
            assert 0.1 - 1e-6 <= area <= 0.9 + 1e-6 or (h, w) == (60, 80)
            oy1, ox1, oy2, ox2 = 18, 16, 42, 48
            inter = max(0, min(oy2, b[0] + h) - max(oy1, b[0])) * \
                max(0, min(ox2, b[1] + w) - max(ox1, b[1]))
            assert inter >= 0.5 * (oy2 - oy1) * (ox2 - ox1) or (h, w) == (60, 80)
            np.testing.assert_allclose(bb[0, 0], [b[0] / 60, b[1] / 80, (b[0] + h) / 60,
                                                  (b[1] + w) / 80], rtol=1e-6)
            seen.add((int(b[0]), int(b[1]), h, w))
    assert len(seen) > 1
    with pytest.raises(tv.errors.InvalidArgumentError, match="No bounding boxes provided"):
        run(tv.image.sample_distorted_bounding_box([10, 10, 3], np.zeros((1, 0, 4), F32))[0])
    whole = run(tv.image.sample_distorted_bounding_box(
        [10, 10, 3], np.zeros((1, 0, 4), F32), use_image_if_no_bounding_boxes=True,
        area_range=(1.0, 1.0), aspect_ratio_range=(1.0, 1.0))[1])
    assert whole.tolist() == [10, 10, -1]
    with pytest.raises(tv.errors.InvalidArgumentError, match="area_range must be within"):
        tv.image.sample_distorted_bounding_box([10, 10, 3], box, area_range=(0.5, 1.5))


def test_draw_bounding_boxes_outlines_in_colour_order():
    img = np.zeros((1, 6, 8, 3), F32)
    got = run(tv.image.draw_bounding_boxes(img, np.array([[[0.2, 0.15, 0.8, 0.9]]], F32)))
    t, l_, b, r = int(0.2 * 5), int(0.15 * 7), int(0.8 * 5), int(0.9 * 7)
    want = np.zeros_like(img)
    yellow = np.array([1, 1, 0], F32)
    want[0, t, l_:r + 1] = want[0, b, l_:r + 1] = yellow
    want[0, t:b + 1, l_] = want[0, t:b + 1, r] = yellow
    np.testing.assert_array_equal(got, want)
    with pytest.raises(tv.errors.InvalidArgumentError, match="images must be float"):
        tv.image.draw_bounding_boxes(np.zeros((1, 4, 4, 3), np.uint8), np.zeros((1, 1, 4), F32))


def test_is_jpeg():
    jpg, png = pil_bytes(U8, "JPEG"), pil_bytes(U8, "PNG")
    assert run([tv.image.is_jpeg(jpg), tv.image.is_jpeg(png)]) == [True, False]
