"""The procedural text-to-image domain of the bundled model family (models/synth).

Scenes hold 1-2 coloured shapes in a 3x3 grid of cells on a solid, gradient or striped
background; captions come from a small grammar with paraphrases. Everything is resolution
independent (unit-square coordinates) and deterministic given a seed, and rendering has no
anti-aliasing: a pixel takes the colour of whatever contains its centre. The C++ port in
synth/render.cc follows this file operation for operation, so both give identical pixels
(tests/synth checks it).

The full specification, with the exact colours and geometry, is in tools/synth/README.md.
"""
import random

# Object colours: saturated, pairwise >= 96 apart (RGB Euclidean). Background colours: the
# same hues mixed 60:40 with white (pairwise >= 58 apart, >= 87 from any other object colour),
# plus black, white and gray. Objects and backgrounds never share a colour name in a scene.
OBJECT_COLORS = {
    "red": (220, 30, 30),
    "orange": (245, 130, 20),
    "yellow": (245, 225, 40),
    "green": (30, 160, 50),
    "cyan": (30, 200, 220),
    "blue": (30, 60, 220),
    "purple": (140, 50, 200),
    "pink": (235, 60, 190),
}
NEUTRAL_BACKGROUNDS = {"black": (30, 30, 30), "white": (245, 245, 245), "gray": (128, 128, 128)}


def _lighten(rgb):
    return tuple((3 * c + 2 * 255 + 2) // 5 for c in rgb)  # round(0.6 c + 0.4 * 255)


BACKGROUND_COLORS = {name: _lighten(rgb) for name, rgb in OBJECT_COLORS.items()}
BACKGROUND_COLORS.update(NEUTRAL_BACKGROUNDS)

SHAPES = ["circle", "square", "triangle", "diamond"]
SIZES = {"small": 0.09, "large": 0.15}  # half-extent in image widths
POSITIONS = [  # index = row * 3 + col
    "top left", "top middle", "top right",
    "middle left", "center", "middle right",
    "bottom left", "bottom middle", "bottom right",
]
BACKGROUND_KINDS = ["solid", "gradient", "stripes"]
STRIPES = 8     # vertical stripes across the image
JITTER = 0.015  # max offset of an object's centre from its cell centre


def sample_scene(rng):
    """A random scene: {"background": {"kind", "colors"}, "objects": [...], "template",
    "size_mentioned": [...]}, using only `rng` (a random.Random)."""
    kind = rng.choice(BACKGROUND_KINDS)
    n_bg = 1 if kind == "solid" else 2
    bg_colors = rng.sample(sorted(BACKGROUND_COLORS), n_bg)
    n_obj = rng.choice([1, 2])
    cells = rng.sample(range(9), n_obj)
    allowed = [c for c in sorted(OBJECT_COLORS) if c not in bg_colors]
    objects = []
    for cell in sorted(cells):
        objects.append({
            "color": rng.choice(allowed),
            "shape": rng.choice(SHAPES),
            "size": rng.choice(sorted(SIZES)),
            "cell": cell,
            "jitter": [round(rng.uniform(-JITTER, JITTER), 4), round(rng.uniform(-JITTER, JITTER), 4)],
        })
    return {
        "background": {"kind": kind, "colors": bg_colors},
        "objects": objects,
        "template": rng.randrange(len(TEMPLATES)),
        # Captions leave the size out now and then; SynthEval then does not judge it.
        "size_mentioned": [rng.random() < 0.8 for _ in objects],
    }


# ----------------------------------------------------------------------------- captions

def _a(phrase):
    """The phrase with its indefinite article ("a red circle", "an orange circle")."""
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _object_phrase(obj, size_mentioned):
    words = ([obj["size"]] if size_mentioned else []) + [obj["color"], obj["shape"]]
    return " ".join(words)


def _background_phrase(bg, article):
    c = bg["colors"]
    if bg["kind"] == "solid":
        phrase = f"{c[0]} background"
    elif bg["kind"] == "gradient":
        phrase = f"{c[0]} to {c[1]} gradient"
    else:
        return f"{c[0]} and {c[1]} stripes"  # plural: no article
    return _a(phrase) if article else phrase


def _t_sentence(scene):
    # "a small red circle in the top left and a large green square in the center on a blue background"
    parts = [f"{_a(_object_phrase(o, m))} in the {POSITIONS[o['cell']]}"
             for o, m in zip(scene["objects"], scene["size_mentioned"])]
    return " and ".join(parts) + " on " + _background_phrase(scene["background"], True)


def _t_listing(scene):
    # "top left: small red circle, center: large green square, blue background"
    parts = [f"{POSITIONS[o['cell']]}: {_object_phrase(o, m)}"
             for o, m in zip(scene["objects"], scene["size_mentioned"])]
    return ", ".join(parts + [_background_phrase(scene["background"], False)])


def _t_background_first(scene):
    # "a blue background with a small red circle in the top left and ..."
    parts = [f"{_a(_object_phrase(o, m))} in the {POSITIONS[o['cell']]}"
             for o, m in zip(scene["objects"], scene["size_mentioned"])]
    return _background_phrase(scene["background"], True) + " with " + " and ".join(parts)


def _t_terse(scene):
    # "small red circle at top left, large green square at center, over blue and white stripes"
    parts = [f"{_object_phrase(o, m)} at {POSITIONS[o['cell']]}"
             for o, m in zip(scene["objects"], scene["size_mentioned"])]
    return ", ".join(parts) + ", over " + _background_phrase(scene["background"], True)


TEMPLATES = [_t_sentence, _t_listing, _t_background_first, _t_terse]


def caption(scene):
    return TEMPLATES[scene["template"]](scene)


def tokenize(text):
    """Words and the punctuation ':' and ',' as separate tokens (the conditioner's tokenizer)."""
    return text.replace(":", " : ").replace(",", " , ").split()


def vocabulary():
    """Every word the grammar can produce, in a fixed order (id 0 = <pad>, 1 = <unk>)."""
    words = set()
    for t in range(len(TEMPLATES)):
        for kind in BACKGROUND_KINDS:
            scene = {"background": {"kind": kind, "colors": ["red", "blue"]},
                     "objects": [{"color": "red", "shape": "circle", "size": "small", "cell": 0,
                                  "jitter": [0, 0]},
                                 {"color": "red", "shape": "circle", "size": "small", "cell": 1,
                                  "jitter": [0, 0]}],
                     "template": t, "size_mentioned": [True, True]}
            words.update(tokenize(caption(scene)))
    for group in (OBJECT_COLORS, BACKGROUND_COLORS, SIZES):
        words.update(group)
    words.update(SHAPES)
    for p in POSITIONS:
        words.update(p.split())
    words.add("an")
    return ["<pad>", "<unk>"] + sorted(words)


# ---------------------------------------------------------------------------- rendering

def _background_pixel(bg, u, v):
    cols = [BACKGROUND_COLORS[c] for c in bg["colors"]]
    if bg["kind"] == "solid":
        return cols[0]
    if bg["kind"] == "gradient":  # top colour to bottom colour
        return tuple(int(a + (b - a) * v + 0.5) for a, b in zip(cols[0], cols[1]))
    stripe = int(u * STRIPES)
    return cols[stripe % 2]


def inside(shape, du, dv, h):
    """Whether offset (du, dv) from a shape's centre (image widths, v down) is inside it."""
    if shape == "circle":
        return du * du + dv * dv <= h * h
    if shape == "square":
        return abs(du) <= 0.85 * h and abs(dv) <= 0.85 * h
    if shape == "diamond":
        return abs(du) + abs(dv) <= h
    # triangle: apex up at (0, -h), base from (-h, h) to (h, h)
    return dv <= h and abs(du) <= (dv + h) * 0.5


def object_center(obj):
    row, col = divmod(obj["cell"], 3)
    return (col + 0.5) / 3.0 + obj["jitter"][0], (row + 0.5) / 3.0 + obj["jitter"][1]


def render(scene, size):
    """uint8 RGB image as a list of rows of (r, g, b), `size` x `size` pixels."""
    centers = [object_center(o) for o in scene["objects"]]
    image = []
    for y in range(size):
        v = (y + 0.5) / size
        row = []
        for x in range(size):
            u = (x + 0.5) / size
            pixel = _background_pixel(scene["background"], u, v)
            for obj, (cx, cy) in zip(scene["objects"], centers):
                if inside(obj["shape"], u - cx, v - cy, SIZES[obj["size"]]):
                    pixel = OBJECT_COLORS[obj["color"]]
            row.append(pixel)
        image.append(row)
    return image


def render_array(scene, size):
    """The same image as a numpy uint8 array [size, size, 3] (vectorised; identical pixels)."""
    import numpy as np
    idx = (np.arange(size, dtype=np.float64) + 0.5) / size
    u = idx[None, :].repeat(size, 0)
    v = idx[:, None].repeat(size, 1)
    bg = scene["background"]
    cols = [np.array(BACKGROUND_COLORS[c], dtype=np.float64) for c in bg["colors"]]
    if bg["kind"] == "solid":
        img = np.broadcast_to(cols[0], (size, size, 3)).copy()
    elif bg["kind"] == "gradient":
        img = np.floor(cols[0] + (cols[1] - cols[0]) * v[..., None] + 0.5)
    else:
        stripe = (u * STRIPES).astype(np.int64) % 2
        img = np.where(stripe[..., None] == 0, cols[0], cols[1])
    for obj in scene["objects"]:
        cx, cy = object_center(obj)
        du, dv, h = u - cx, v - cy, SIZES[obj["size"]]
        shape = obj["shape"]
        if shape == "circle":
            mask = du * du + dv * dv <= h * h
        elif shape == "square":
            mask = (np.abs(du) <= 0.85 * h) & (np.abs(dv) <= 0.85 * h)
        elif shape == "diamond":
            mask = np.abs(du) + np.abs(dv) <= h
        else:
            mask = (dv <= h) & (np.abs(du) <= (dv + h) * 0.5)
        img[mask] = OBJECT_COLORS[obj["color"]]
    return img.astype(np.uint8)


def scene_rng(seed):
    return random.Random(seed)
