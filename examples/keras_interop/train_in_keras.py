"""The Keras side of the keras_interop example: trains a small text classifier in Keras 3, saves it as a .keras
archive for the C++ program, and later opens the archive the C++ program wrote after fine-tuning it.

    python train_in_keras.py train    FOLDER   # writes FOLDER/text_classifier.keras and the data (.npy)
    ./build/examples/keras_interop    FOLDER   # loom loads, evaluates, fine-tunes, saves loom_finetuned.keras
    python train_in_keras.py evaluate FOLDER   # Keras loads loom_finetuned.keras and evaluates it

Needs keras (3.x) with a backend (KERAS_BACKEND, JAX by default here) and numpy. The task is procedural, so
nothing is downloaded: "reviews" of 6 to 24 tokens, each a positive word, a negative word, a neutral one or
"not", which turns the sentiment of the word after it around; the label says which sentiment occurs more often
(0 negative, 1 positive, 2 as many of each). Telling "not good" from "good" needs attention to the neighbour.
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import layers, ops  # noqa: E402

SEQUENCE_LENGTH, VOCABULARY, EMBEDDING = 24, 64, 32
EPOCHS = 2  # a short start: the C++ program trains on from here
NOT, POSITIVE, NEGATIVE = 1, range(2, 10), range(10, 18)  # token ids; 0 is padding, 18.. are neutral words


@keras.saving.register_keras_serializable(package="loom_example")
class PositionEmbedding(layers.Layer):
    """Adds a learned embedding of each position, [sequence_length, output_dim]; passes the mask on.
    loom's counterpart: position_embedding.hpp, registered under the same name."""

    def __init__(self, sequence_length, output_dim, **kwargs):
        super().__init__(**kwargs)
        self.sequence_length = sequence_length
        self.output_dim = output_dim
        self.supports_masking = True

    def build(self, input_shape):
        self.embeddings = self.add_weight(name="embeddings", shape=(self.sequence_length, self.output_dim),
                                          initializer="random_normal")

    def call(self, x):
        return x + self.embeddings[None, : ops.shape(x)[1]]

    def get_config(self):
        return {**super().get_config(), "sequence_length": self.sequence_length, "output_dim": self.output_dim}


def reviews(count, rng):
    """Token ids [count, SEQUENCE_LENGTH] (zero-padded at the end) and labels [count], int64 as loom reads them."""
    x = np.zeros((count, SEQUENCE_LENGTH), dtype=np.int64)
    y = np.zeros(count, dtype=np.int64)
    for row in range(count):
        length = rng.integers(6, SEQUENCE_LENGTH + 1)
        kind = rng.choice(4, size=length, p=[0.6, 0.15, 0.15, 0.1])  # neutral, positive, negative, "not"
        x[row, :length] = np.select([kind == 0, kind == 1, kind == 2, kind == 3],
                                    [rng.integers(18, VOCABULARY, size=length),
                                     rng.integers(POSITIVE.start, POSITIVE.stop, size=length),
                                     rng.integers(NEGATIVE.start, NEGATIVE.stop, size=length),
                                     np.full(length, NOT)])
        negated = np.concatenate([[False], kind[:-1] == 3])  # "not good" counts as negative, "not bad" positive
        positive = int(((kind == 1) & ~negated).sum() + ((kind == 2) & negated).sum())
        negative = int(((kind == 2) & ~negated).sum() + ((kind == 1) & negated).sum())
        y[row] = 1 if positive > negative else 0 if negative > positive else 2
    return x, y


def text_classifier():
    """keras.io's Transformer text classifier, small: token and position embeddings, one attention block."""
    tokens = keras.Input((SEQUENCE_LENGTH,), dtype="int32", name="tokens")
    h = layers.Embedding(VOCABULARY, EMBEDDING, mask_zero=True)(tokens)
    h = PositionEmbedding(SEQUENCE_LENGTH, EMBEDDING)(h)
    attention = layers.MultiHeadAttention(num_heads=2, key_dim=16)(h, h)
    h = layers.LayerNormalization()(h + layers.Dropout(0.1)(attention))
    h = layers.GlobalAveragePooling1D()(h)
    h = layers.Dense(32, activation="relu")(h)
    probabilities = layers.Dense(3, activation="softmax")(h)
    model = keras.Model(tokens, probabilities, name="text_classifier")
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=3e-3), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model


def train(folder):
    os.makedirs(folder, exist_ok=True)
    keras.utils.set_random_seed(7)
    rng = np.random.default_rng(7)
    (x_train, y_train), (x_test, y_test) = reviews(4000, rng), reviews(1000, rng)
    for name, array in [("x_train", x_train), ("y_train", y_train), ("x_test", x_test), ("y_test", y_test)]:
        np.save(os.path.join(folder, f"{name}.npy"), array)
    model = text_classifier()
    model.fit(x_train.astype("int32"), y_train, batch_size=32, epochs=EPOCHS, verbose=2)
    loss, accuracy = model.evaluate(x_test.astype("int32"), y_test, verbose=0)
    print(f"Keras, test set: loss {loss:.4f}, accuracy {accuracy:.4f}")
    np.save(os.path.join(folder, "keras_predictions.npy"), model.predict(x_test.astype("int32"), verbose=0))
    model.save(os.path.join(folder, "text_classifier.keras"))
    print(f"wrote {os.path.join(folder, 'text_classifier.keras')}")


def evaluate(folder):
    model = keras.saving.load_model(os.path.join(folder, "loom_finetuned.keras"))
    x_test = np.load(os.path.join(folder, "x_test.npy")).astype("int32")  # loom's token ids are int64
    y_test = np.load(os.path.join(folder, "y_test.npy"))
    loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
    print(f"Keras, loom's fine-tuned model, test set: loss {loss:.4f}, accuracy {accuracy:.4f}")
    loom_predictions = np.load(os.path.join(folder, "loom_predictions.npy"))
    difference = np.abs(model.predict(x_test, verbose=0) - loom_predictions).max()
    print(f"largest difference from loom's predictions: {difference:.2e}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("train", "evaluate"):
        sys.exit(__doc__)
    (train if sys.argv[1] == "train" else evaluate)(sys.argv[2])
