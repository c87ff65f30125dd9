"""Training steps of real models (Keras on TensorFlow) and the TensorFlow device set-up.

A :class:`TrainStep` is one model with its optimizer and loss: ``concrete(batch)`` traces the whole
training step (forward, backward, optimizer update; Celeritas §6.3 times this step) into one graph.
Models: ``inceptionv3``, ``resnet50``, ``vgg19`` (``keras.applications``, ``weights=None``),
``transformer`` (an encoder built from Keras layers), ``convnet`` (two convolutions, for tests), ``lstm`` (unrolled LSTM layers) and
``lstm_loop`` (the same with a ``While`` loop, which extraction rejects: loops are out of scope).

TensorFlow is imported inside functions only, so ``import dplace`` never loads it.
"""
from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from dplace.errors import InvalidInstanceError

_CONFIGURED: dict[str, Any] = {}


def _import_quietly(name: str) -> None:
    """Import ``name`` with file descriptor 2 on /dev/null: TensorFlow's C++ start-up lines (oneDNN, CPU
    features) ignore TF_CPP_MIN_LOG_LEVEL and would break the one-line-error rule of the CLI. A failed
    import still raises its Python exception."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
        importlib.import_module(name)
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _tf():
    """Import TensorFlow quietly and apply the runtime's process-wide settings once."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "tensorflow" not in sys.modules:
        # OR-Tools' pywraplp loaded after TensorFlow segfaults in Solve (m_sct_capped's LP; seen with
        # tensorflow-cpu 2.21 and ortools 9.15); loaded before it, both work
        try:
            importlib.import_module("ortools.linear_solver.pywraplp")
        except ImportError:
            pass
        _import_quietly("tensorflow")
    import tensorflow as tf

    if not _CONFIGURED.get("opts"):
        # Grappler would fuse and rename nodes: the graph that runs must be the graph that was placed.
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
        # Never let TensorFlow move an op silently away from the device it was given.
        tf.config.set_soft_device_placement(False)
        _CONFIGURED["opts"] = True
    return tf


def ensure_logical_cpus(n: int) -> int:
    """Split the CPU into ``n`` logical devices if TensorFlow is not initialised yet; return how many
    logical CPUs this process has (it can be fewer than ``n`` when TF was initialised before)."""
    tf = _tf()
    if "cpus" not in _CONFIGURED:
        cpu = tf.config.list_physical_devices("CPU")[0]
        try:
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * max(1, n))
        except RuntimeError:  # already initialised: keep what there is
            pass
        _CONFIGURED["cpus"] = len(tf.config.list_logical_devices("CPU"))
    return _CONFIGURED["cpus"]


def short_device(name: str) -> str:
    """'/job:localhost/replica:0/task:0/device:CPU:1' or '/device:CPU:1' -> 'CPU:1'."""
    tf = _tf()
    spec = tf.DeviceSpec.from_string(name)
    if spec.device_type is None:
        return name
    return f"{spec.device_type.upper()}:{spec.device_index or 0}"


def resolve_devices(spec: str | int) -> list[str]:
    """Device names ('CPU:0', 'GPU:1', ...) for ``spec``: a count N (N logical CPUs), ``gpu`` (every
    GPU present) or a comma-separated list of names. Raises if the devices are not there."""
    tf = _tf()
    s = str(spec).strip()
    if s.isdigit():
        n = int(s)
        if n < 1:
            raise InvalidInstanceError(f"devices: need at least 1, got {spec!r}")
        have = ensure_logical_cpus(n)
        if have < n:
            raise InvalidInstanceError(f"devices: {n} logical CPUs requested but this process has {have}")
        return [f"CPU:{i}" for i in range(n)]
    ensure_logical_cpus(1)
    present = [short_device(d.name) for d in tf.config.list_logical_devices()]
    if s.lower() == "gpu":
        gpus = [d for d in present if d.startswith("GPU:")]
        if not gpus:
            raise InvalidInstanceError("devices: 'gpu' requested but TensorFlow sees no GPU")
        return gpus
    names = []
    for x in s.split(","):
        x = x.strip()
        try:
            names.append(short_device(x if x.startswith("/") else "/device:" + x))
        except ValueError:
            raise InvalidInstanceError(f"devices: {x!r} is not a device name (use N, 'gpu' or names like GPU:0,GPU:1)") from None
    for nm in names:
        if nm not in present:
            raise InvalidInstanceError(f"devices: {nm!r} is not present (present: {', '.join(present)})")
    return names


def tf_device(name: str) -> str:
    """Instance device name 'CPU:1' -> TensorFlow device string '/device:CPU:1'."""
    return name if name.startswith("/") else "/device:" + name


# ---------------------------------------------------------------------------------------- models
@dataclass(frozen=True)
class ModelOptions:
    image_size: int | None = None  # images: side in pixels (default: the model's own)
    width: int | None = None  # transformer d_model / LSTM units
    layers: int | None = None  # transformer blocks / LSTM layers
    seq_len: int = 32  # transformer / LSTM sequence length
    vocab: int = 1000
    classes: int = 10
    learning_rate: float = 1e-3
    momentum: float = 0.9  # SGD with momentum: one optimizer slot per trainable variable
    seed: int = 0


def _image_model(app: str, default_size: int, min_size: int):
    def build(o: ModelOptions):
        import keras

        size = o.image_size or default_size
        if size < min_size:
            raise InvalidInstanceError(f"image_size: {app} needs at least {min_size}, got {size}")
        cls = getattr(keras.applications, app)
        model = cls(weights=None, input_shape=(size, size, 3), classes=o.classes)
        return model, ("image", (size, size, 3))

    return build


def _transformer(o: ModelOptions):
    import keras
    from keras import layers

    d, nl, heads = o.width or 128, o.layers or 2, 4
    tok = keras.Input((o.seq_len,), dtype="int32", name="tokens")
    h = layers.Embedding(o.vocab, d, name="embed")(tok)
    pos = layers.Embedding(o.seq_len, d, name="pos_embed")(keras.ops.arange(o.seq_len))
    h = h + pos
    for i in range(nl):
        a = layers.MultiHeadAttention(heads, d // heads, name=f"attn{i}")(h, h)
        h = layers.LayerNormalization(name=f"ln{i}a")(h + a)
        f = layers.Dense(4 * d, activation="relu", name=f"ff{i}a")(h)
        f = layers.Dense(d, name=f"ff{i}b")(f)
        h = layers.LayerNormalization(name=f"ln{i}b")(h + f)
    h = layers.GlobalAveragePooling1D(name="pool")(h)
    out = layers.Dense(o.classes, activation="softmax", name="head")(h)
    return keras.Model(tok, out, name="transformer"), ("tokens", (o.seq_len,))


def _lstm(unroll: bool):
    def build(o: ModelOptions):
        import keras
        from keras import layers

        units, nl = o.width or 64, o.layers or 2
        tok = keras.Input((o.seq_len,), dtype="int32", name="tokens")
        h = layers.Embedding(o.vocab, units, name="embed")(tok)
        for i in range(nl):
            h = layers.LSTM(units, return_sequences=i < nl - 1, unroll=unroll, name=f"lstm{i}")(h)
        out = layers.Dense(o.classes, activation="softmax", name="head")(h)
        return keras.Model(tok, out, name="lstm" if unroll else "lstm_loop"), ("tokens", (o.seq_len,))

    return build


def _convnet(o: ModelOptions):
    """A tiny CNN for tests: two 3x3 convolutions (width filters, default 8), pooling, a dense head."""
    import keras
    from keras import layers

    size, w = o.image_size or 16, o.width or 8
    img = keras.Input((size, size, 3), name="image")
    h = layers.Conv2D(w, 3, padding="same", activation="relu", name="conv1")(img)
    h = layers.Conv2D(w, 3, padding="same", activation="relu", name="conv2")(h)
    h = layers.GlobalAveragePooling2D(name="pool")(h)
    out = layers.Dense(o.classes, activation="softmax", name="head")(h)
    return keras.Model(img, out, name="convnet"), ("image", (size, size, 3))


MODELS: dict[str, Callable[[ModelOptions], Any]] = {
    "convnet": _convnet,
    "inceptionv3": _image_model("InceptionV3", 299, 75),
    "resnet50": _image_model("ResNet50", 224, 32),
    "vgg19": _image_model("VGG19", 224, 32),
    "transformer": _transformer,
    "lstm": _lstm(True),
    "lstm_loop": _lstm(False),
}


@dataclass
class TrainStep:
    """One model's training step. ``concrete(batch)`` is the traced graph; ``initial`` holds every
    variable's value before any step ran (the execute loss check restarts from it)."""

    name: str
    options: ModelOptions
    model: Any
    optimizer: Any
    function: Any  # tf.function(x, y) -> loss
    input_kind: str
    input_shape: tuple
    initial: dict[int, Any] = field(default_factory=dict)  # id(variable handle) -> numpy value
    variables: dict[int, Any] = field(default_factory=dict)  # id(variable handle) -> variable
    _concrete: dict[int, Any] = field(default_factory=dict)

    def inputs(self, batch: int):
        """Deterministic example inputs (x, y) for ``batch``."""
        import numpy as np

        tf = _tf()
        rng = np.random.default_rng(self.options.seed + 1000 * batch)
        if self.input_kind == "image":
            x = rng.random((batch, *self.input_shape), dtype=np.float32)
        else:
            x = rng.integers(0, self.options.vocab, (batch, *self.input_shape), dtype=np.int32)
        y = rng.integers(0, self.options.classes, (batch,), dtype=np.int32)
        return tf.constant(x), tf.constant(y)

    def concrete(self, batch: int):
        if batch < 1:
            raise InvalidInstanceError(f"batch must be >= 1, got {batch}")
        if batch not in self._concrete:
            x, y = self.inputs(batch)
            self._concrete[batch] = self.function.get_concrete_function(x, y)
        return self._concrete[batch]

    def variable_of(self, handle) -> Any:
        return self.variables.get(id(handle))

    def describe(self, batch: int) -> dict[str, Any]:
        from dataclasses import asdict

        return {"model": self.name, "batch": batch, "options": asdict(self.options)}


def build_step(model: str, device: str | None = None, **options: Any) -> TrainStep:
    """Build ``model`` (a name in :data:`MODELS`) with its optimizer, its variables on ``device`` (e.g.
    'GPU:0'; default TensorFlow's choice) where profiling will run it; names are reset first so the same
    call gives the same graph node names in every process."""
    if model not in MODELS:
        raise InvalidInstanceError(f"model: unknown model {model!r}; valid: {', '.join(sorted(MODELS))}")
    valid = ModelOptions.__dataclass_fields__
    for k in options:
        if k not in valid:
            raise InvalidInstanceError(f"model option: unknown option {k!r}; valid: {', '.join(valid)}")
    opts = ModelOptions(**{k: v for k, v in options.items() if v is not None})
    tf = _tf()
    ensure_logical_cpus(1)
    import keras

    keras.backend.clear_session()
    keras.utils.set_random_seed(opts.seed)
    with tf.device(tf_device(device) if device else None):
        net, (kind, shape) = MODELS[model](opts)
        opt = keras.optimizers.SGD(opts.learning_rate, momentum=opts.momentum)
        opt.build(net.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, net(x, training=True))
        grads = tape.gradient(loss, net.trainable_variables)
        opt.apply_gradients(zip(grads, net.trainable_variables))
        return loss

    variables = {id(v.handle): v for v in list(net.variables) + list(opt.variables)}
    initial = {k: v.numpy() for k, v in variables.items()}
    return TrainStep(model, opts, net, opt, train_step, kind, shape, initial, variables)
