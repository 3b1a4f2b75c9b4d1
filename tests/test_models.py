"""Tests for skcce.models: VGG-4 against supplement Table 3, init, registry, ResNet-18,
presets and augmentation."""

import math

import pytest
import torch
from torch import nn

from skcce.models import (
    MODEL_NAMES,
    VGG4,
    ResNet18,
    build_model,
    default_augmentation,
    forked_rng,
    get_preset,
    kaiming_normal_,
    param_groups,
)

# Supplement Table 3: per column, the input, the (out_channels, stride) of the four 5x5 pad-2
# convolutions, and the linear layer's in_features.
TABLE3 = {
    (1, 28, 28): ([64, 128, 256, 512], 1, 512 * 3 * 3),
    (3, 32, 32): ([32, 64, 128, 256], 1, 256 * 4 * 4),
    (3, 96, 96): ([128, 256, 512, 1024], 2, 1024 * 1 * 1),
}


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------- Kaiming helper


def test_kaiming_normal_std_and_determinism():
    w = torch.empty(200, 500)
    kaiming_normal_(w, generator=_gen(1))
    assert w.mean().abs() < 0.01
    assert abs(w.std().item() - math.sqrt(2 / 500)) < 0.002
    w2 = kaiming_normal_(torch.empty(200, 500), generator=_gen(1))
    assert torch.equal(w, w2)
    # conv weight: fan_in = in_channels * kh * kw
    c = kaiming_normal_(torch.empty(400, 8, 5, 5), generator=_gen(2))
    assert abs(c.std().item() - math.sqrt(2 / (8 * 25))) < 0.003
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        kaiming_normal_(torch.empty(5))


# ---------------------------------------------------------------- linear


def test_linear_shape_init_and_no_global_rng_use():
    state = torch.random.get_rng_state()
    m = build_model("linear", (300,), 400, generator=_gen(0))
    assert torch.equal(torch.random.get_rng_state(), state)  # global RNG untouched
    assert isinstance(m, nn.Linear) and (m.in_features, m.out_features) == (300, 400)
    assert torch.count_nonzero(m.bias) == 0
    assert abs(m.weight.std().item() - math.sqrt(2 / 300)) < 0.002
    assert m(torch.randn(5, 300)).shape == (5, 400)
    m2 = build_model("linear", (300,), 400, generator=_gen(0))
    m3 = build_model("linear", (300,), 400, generator=_gen(1))
    assert torch.equal(m.weight, m2.weight)
    assert not torch.equal(m.weight, m3.weight)


def test_linear_rejects_image_shape():
    with pytest.raises(ValueError, match="flat input_shape"):
        build_model("linear", (1, 28, 28), 10)


# ---------------------------------------------------------------- VGG-4


@pytest.mark.parametrize("shape", list(TABLE3))
def test_vgg4_layers_match_table3(shape):
    widths, stride, flat = TABLE3[shape]
    net = VGG4(shape, 7, generator=_gen())
    convs = [m for m in net.features if isinstance(m, nn.Conv2d)]
    bns = [m for m in net.features if isinstance(m, nn.BatchNorm2d)]
    pools = [m for m in net.features if isinstance(m, nn.MaxPool2d)]
    assert [c.out_channels for c in convs] == widths
    assert [c.in_channels for c in convs] == [shape[0], *widths[:3]]
    for c in convs:
        assert c.kernel_size == (5, 5)
        assert c.stride == (stride, stride)
        assert c.padding == (2, 2)
    assert [b.num_features for b in bns] == widths
    assert len(pools) == 3
    for p in pools:
        assert p.kernel_size == 2 and p.stride == 2
    # order: conv, BN, ReLU, [pool] ... and no pool after the last conv
    kinds = [type(m).__name__ for m in net.features]
    assert kinds == ["Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d"] * 3 + [
        "Conv2d",
        "BatchNorm2d",
        "ReLU",
    ]
    assert net.head.in_features == flat and net.head.out_features == 7
    # the actual feature map agrees with the table's flatten size
    with torch.no_grad():
        feats = net.features(torch.zeros(2, *shape))
    assert feats[0].numel() == flat


@pytest.mark.parametrize("shape", list(TABLE3))
def test_vgg4_output_shape_and_build_model(shape):
    net = build_model("vgg4", shape, 10, generator=_gen())
    assert isinstance(net, VGG4)
    out = net(torch.randn(3, *shape))
    assert out.shape == (3, 10)
    assert torch.isfinite(out).all()


def test_vgg4_final_layer_kaiming_zero_bias():
    net = VGG4((1, 28, 28), 300, generator=_gen(3))
    assert torch.count_nonzero(net.head.bias) == 0
    std = net.head.weight.std().item()
    assert abs(std - math.sqrt(2 / 4608)) < 0.1 * math.sqrt(2 / 4608)
    bn = net.features[1]
    assert torch.all(bn.weight == 1) and torch.all(bn.bias == 0)


def test_vgg4_deterministic_given_generator():
    state = torch.random.get_rng_state()
    a = VGG4((3, 32, 32), 10, generator=_gen(5))
    b = VGG4((3, 32, 32), 10, generator=_gen(5))
    c = VGG4((3, 32, 32), 10, generator=_gen(6))
    assert torch.equal(torch.random.get_rng_state(), state)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["features.0.weight"], sc["features.0.weight"])


def test_vgg4_unsupported_shape_and_explicit_variant():
    with pytest.raises(ValueError, match=r"\(1, 28, 28\).*\(3, 32, 32\).*\(3, 96, 96\)"):
        VGG4((3, 64, 64), 10)
    net = VGG4((3, 64, 64), 10, variant="rgb32")  # 64->64->32->32->16->16->8->8
    assert net.head.in_features == 256 * 8 * 8
    assert net(torch.zeros(2, 3, 64, 64)).shape == (2, 10)
    with pytest.raises(ValueError, match="too small"):
        VGG4((1, 4, 4), 10, variant="grey28")
    with pytest.raises(ValueError, match="Unknown VGG4 variant"):
        VGG4((1, 28, 28), 10, variant="huge")


# ---------------------------------------------------------------- registry


def test_build_model_user_module_returned_as_is():
    m = nn.Sequential(nn.Flatten(), nn.Linear(12, 4))
    m.train()
    assert build_model(m, (3, 4), 4) is m
    assert m.training  # training flag restored after the eval-mode check


def test_build_model_check_does_not_touch_batchnorm_stats():
    m = nn.Sequential(nn.Linear(5, 3), nn.BatchNorm1d(3))
    before = m[1].running_mean.clone()
    build_model(m, (5,), 3)
    assert torch.equal(m[1].running_mean, before)
    assert int(m[1].num_batches_tracked) == 0


def test_build_model_bad_module():
    with pytest.raises(ValueError, match=r"expected \(2, 5\)"):
        build_model(nn.Linear(8, 3), (8,), 5)
    with pytest.raises(ValueError, match="could not be applied"):
        build_model(nn.Linear(8, 3), (9,), 3)


def test_build_model_factory_deterministic():
    def factory(input_shape, n_clusters):
        return nn.Linear(input_shape[0], n_clusters)  # default torch init (global RNG)

    state = torch.random.get_rng_state()
    a = build_model(factory, (6,), 2, generator=_gen(9))
    b = build_model(factory, (6,), 2, generator=_gen(9))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert isinstance(a, nn.Linear) and torch.equal(a.weight, b.weight)
    with pytest.raises(ValueError, match=r"expected \(2, 3\)"):
        build_model(lambda s, k: nn.Linear(s[0], 2), (6,), 3)
    with pytest.raises(ValueError, match="must return a torch.nn.Module"):
        build_model(lambda s, k: "not a module", (6,), 3)


def test_build_model_unknown_name_and_bad_args():
    with pytest.raises(ValueError, match=r"known names are \['linear', 'vgg4', 'resnet18'\]"):
        build_model("vgg16", (3, 32, 32), 10)
    assert MODEL_NAMES == ("linear", "vgg4", "resnet18")
    with pytest.raises(ValueError, match="n_clusters"):
        build_model("linear", (4,), 0)
    with pytest.raises(ValueError, match="input_shape"):
        build_model("linear", (), 3)
    with pytest.raises(TypeError, match="name_or_module"):
        build_model(42, (4,), 3)


def test_forked_rng_restores_global_state():
    state = torch.random.get_rng_state()
    with forked_rng(_gen(0)):
        a = torch.rand(3)
    assert torch.equal(torch.random.get_rng_state(), state)
    with forked_rng(_gen(0)):
        b = torch.rand(3)
    assert torch.equal(a, b)


# ---------------------------------------------------------------- ResNet-18


def test_resnet18_from_scratch_deterministic_and_groups():
    state = torch.random.get_rng_state()
    a = build_model("resnet18", (3, 32, 32), 10, generator=_gen(0))
    b = build_model("resnet18", (3, 32, 32), 10, generator=_gen(0))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert isinstance(a, ResNet18)
    assert a(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    assert torch.equal(a.backbone.conv1.weight, b.backbone.conv1.weight)
    assert torch.equal(a.head.weight, b.head.weight)
    assert torch.count_nonzero(a.head.bias) == 0
    groups = a.param_groups(lr_head=5e-2, lr_backbone=1e-5)
    assert [g["lr"] for g in groups] == [5e-2, 1e-5]
    head_ids = {id(p) for p in groups[0]["params"]}
    back_ids = {id(p) for p in groups[1]["params"]}
    assert head_ids == {id(a.head.weight), id(a.head.bias)}
    assert not head_ids & back_ids
    assert head_ids | back_ids == {id(p) for p in a.parameters()}
    opt = torch.optim.Adam(groups)
    assert len(opt.param_groups) == 2


def test_resnet18_grey_input_channels():
    net = ResNet18((1, 32, 32), 3)
    assert net.backbone.conv1.in_channels == 1
    assert net(torch.zeros(2, 1, 32, 32)).shape == (2, 3)


def test_resnet18_from_weights_file(tmp_path):
    import timm

    src = timm.create_model("resnet18", pretrained=False, num_classes=1000)
    with torch.no_grad():
        src.conv1.weight.fill_(0.125)
    path = tmp_path / "r18.pt"
    torch.save(src.state_dict(), path)
    net = build_model("resnet18", (3, 32, 32), 5, weights=path, generator=_gen(1))
    assert torch.equal(net.backbone.conv1.weight, src.conv1.weight)
    assert net.head.out_features == 5  # the 1000-class fc was ignored
    # wrapped and prefixed checkpoints load too
    wrapped = {"state_dict": {f"module.{k}": v for k, v in src.state_dict().items()}}
    torch.save(wrapped, tmp_path / "wrapped.pt")
    net2 = ResNet18((3, 32, 32), 5, weights=tmp_path / "wrapped.pt")
    assert torch.equal(net2.backbone.layer4[1].bn2.weight, src.layer4[1].bn2.weight)


def test_resnet18_weights_that_do_not_fit(tmp_path):
    import timm

    grey = timm.create_model("resnet18", pretrained=False, num_classes=0, in_chans=1)
    torch.save(grey.state_dict(), tmp_path / "grey.pt")
    with pytest.raises(ValueError, match=r"shape mismatch.*conv1.weight"):
        ResNet18((3, 32, 32), 5, weights=tmp_path / "grey.pt")
    torch.save({"conv1.weight": torch.zeros(64, 3, 7, 7)}, tmp_path / "partial.pt")
    with pytest.raises(ValueError, match="missing"):
        ResNet18((3, 32, 32), 5, weights=tmp_path / "partial.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="Could not read"):
        ResNet18((3, 32, 32), 5, weights=tmp_path / "junk.pt")
    with pytest.raises(FileNotFoundError):
        ResNet18((3, 32, 32), 5, weights=tmp_path / "absent.pt")


def test_param_groups_single_group_for_plain_model():
    m = nn.Linear(3, 2)
    groups = param_groups(m, 0.1, 0.001)
    assert len(groups) == 1 and groups[0]["lr"] == 0.1 and len(groups[0]["params"]) == 2
    vgg = VGG4((1, 28, 28), 4)
    g2 = param_groups(vgg, 1e-3, 1e-4)
    assert [len(g["params"]) for g in g2] == [2, 12]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.cuda
def test_models_run_on_cuda():
    for name, shape in [("linear", (8,)), ("vgg4", (3, 32, 32))]:
        net = build_model(name, shape, 4, generator=_gen()).to("cuda")
        assert build_model(net, shape, 4) is net
        assert net(torch.zeros(2, *shape, device="cuda")).device.type == "cuda"


# ---------------------------------------------------------------- presets


def test_presets_match_supplement():
    wd = {"mnist": 0.001, "cifar10": 0.02, "cifar100-20": 0.009, "stl10": 0.02}
    for ds, w in wd.items():
        p = get_preset("table1", ds)
        assert p["weight_decay"] == w
        assert (p["model"], p["optimizer"], p["learning_rate"]) == ("linear", "sgd", 0.1)
        assert (p["batch_size"], p["max_epochs"], p["lam"]) == (250, 10, 100)
        assert p["n_iter_no_change"] is None  # the supplement's fixed 10 epochs
    for ds in wd:
        p = get_preset("table2", ds)
        assert (p["model"], p["optimizer"], p["learning_rate"]) == ("vgg4", "adam", 1e-4)
        assert (p["weight_decay"], p["max_epochs"], p["n_runs"]) == (0.01, 50, 6)
        assert p["batch_size"] == (160 if ds == "stl10" else 250)
    aw = {"stl10": 0.5, "cifar10": 0.2, "cifar100-20": 0.4}
    for ds, w in aw.items():
        p = get_preset("table4", ds)
        assert p["augment_weight"] == w
        assert (p["learning_rate"], p["backbone_learning_rate"]) == (5e-2, 1e-5)
        assert (p["weight_decay"], p["batch_size"], p["max_epochs"], p["lam"]) == (
            1e-4,
            200,
            50,
            100,
        )
    # returned dicts are fresh copies
    get_preset("table1", "mnist")["lam"] = -1
    assert get_preset("table1", "mnist")["lam"] == 100


def test_presets_errors():
    with pytest.raises(ValueError, match="table1"):
        get_preset("table3", "mnist")
    with pytest.raises(ValueError, match="covers"):
        get_preset("table4", "mnist")


# ---------------------------------------------------------------- augmentation


@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 32, 32), (3, 96, 96)])
def test_augmentation_shape_changes_and_determinism(shape):
    aug = default_augmentation(shape)
    x = torch.rand(6, *shape)
    state = torch.random.get_rng_state()
    a = aug(x, generator=_gen(0))
    b = aug(x, generator=_gen(0))
    c = aug(x, generator=_gen(1))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert a.shape == x.shape and a.dtype == x.dtype
    assert not torch.equal(a, x)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    # per-sample randomness: the same image repeated gets different augmentations
    rep = aug(x[:1].repeat(6, *([1] * len(shape))), generator=_gen(2))
    assert len({tuple(r.flatten()[:64].tolist()) for r in rep}) > 1


def test_augmentation_constructor_generator_advances():
    aug = default_augmentation((3, 32, 32), generator=_gen(4))
    x = torch.rand(3, 3, 32, 32)
    first, second = aug(x), aug(x)
    assert not torch.equal(first, second)
    aug2 = default_augmentation((3, 32, 32), generator=_gen(4))
    assert torch.equal(aug2(x), first)


def test_augmentation_errors():
    with pytest.raises(ValueError, match="image input_shape"):
        default_augmentation((10,))
    with pytest.raises(ValueError, match="batch of images"):
        default_augmentation((3, 32, 32))(torch.rand(3, 32, 32))


@pytest.mark.parametrize("name,shape", [("linear", (5,)), ("vgg4", (1, 28, 28))])
def test_models_pickle_roundtrip(name, shape):
    import pickle

    m = build_model(name, shape, 3, generator=_gen(0)).eval()
    m2 = pickle.loads(pickle.dumps(m))
    x = torch.randn(2, *shape)
    with torch.no_grad():
        assert torch.equal(m(x), m2(x))
