"""Writes the seed corpus of the fuzz targets (run from any folder; needs only Python 3):

    python3 tests/fuzz/make_corpus.py

Every file is written byte by byte here, so the corpus does not depend on NumPy's or safetensors' versions.
Names carry no .npy/.safetensors suffix: they are fuzzer inputs, not data files. The corpus holds small valid
files of each dtype and several shapes, plus truncated and malformed ones that the readers must reject.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


# ---- .npy ----

NPY_FORMATS = {"<f4": "f", "<f8": "d", "<i8": "q", "|b1": "B"}


def npy(descr, shape, values, version=1, fortran=False, shape_text=None):
    """A .npy file as np.save writes it: magic, version, header length, padded header dict, data."""
    if shape_text is None:
        shape_text = "({},)".format(shape[0]) if len(shape) == 1 else "({})".format(", ".join(map(str, shape)))
    header = "{{'descr': '{}', 'fortran_order': {}, 'shape': {}, }}".format(descr, fortran, shape_text)
    length_size = 2 if version == 1 else 4
    unpadded = 6 + 2 + length_size + len(header) + 1
    header += " " * ((64 - unpadded % 64) % 64) + "\n"
    length = struct.pack("<H" if version == 1 else "<I", len(header))
    data = struct.pack("<" + NPY_FORMATS.get(descr, "f") * len(values), *values)  # unknown dtypes: float32 bytes
    return b"\x93NUMPY" + bytes([version, 0]) + length + header.encode("latin-1") + data


def npy_corpus():
    t = "fuzz_load_npy"
    f32_2x3 = npy("<f4", (2, 3), [-1.25, -0.75, -0.25, 0.25, 0.75, 1.25])
    write(t, "f32_2x3", f32_2x3)
    write(t, "f64_scalar", npy("<f8", (), [3.25]))
    write(t, "f64_vector_v2", npy("<f8", (4,), [0.0, -0.0, float("inf"), 1e-300], version=2))
    write(t, "i64_4x1_v2", npy("<i8", (4, 1), [-3, 0, 7, 2**40], version=2))
    write(t, "bool_5_v3", npy("|b1", (5,), [1, 0, 0, 1, 1], version=3))
    write(t, "bool_stray_bytes", npy("|b1", (2, 2), [0, 2, 255, 1]))
    write(t, "f32_0x3_empty", npy("<f4", (0, 3), []))
    write(t, "f32_2x1x2x1_4d", npy("<f4", (2, 1, 2, 1), [1.0, 2.0, 3.0, 4.0]))
    write(t, "f32_trailing_bytes", f32_2x3 + b"\x00" * 7)
    # Rejected.
    write(t, "bad_truncated_data", f32_2x3[:-5])
    write(t, "bad_truncated_header", f32_2x3[:40])
    write(t, "bad_magic", b"\x93NUMPX" + f32_2x3[6:])
    write(t, "bad_version", f32_2x3[:6] + b"\x04\x00" + f32_2x3[8:])
    write(t, "bad_big_endian", npy(">f4", (3,), [1.0, 2.0, 3.0]))
    write(t, "bad_fortran_order", npy("<f8", (2, 2), [1.0, 2.0, 3.0, 4.0], fortran=True))
    write(t, "bad_dtype_i4", npy("<i4", (2,), [1.0, 2.0]))
    write(t, "bad_shape_not_tuple", npy("<f4", (3,), [1.0, 2.0, 3.0], shape_text="(3)"))
    write(t, "bad_shape_overflow", npy("<f4", (2,), [1.0, 2.0], shape_text="(4611686018427387904, 4)"))
    write(t, "bad_negative_dimension", npy("<f4", (2,), [1.0, 2.0], shape_text="(-2,)"))
    # Sizes near 2^63: zero-size tensors whose other dimensions overflow the strides or the ops' outputs.
    write(t, "zero_size_2p30_2p30", npy("<f4", (0,), [], shape_text="(0, 1073741824, 1073741824)"))
    write(t, "bad_zero_size_strides_overflow", npy("<f4", (0,), [], shape_text="(0, 4611686018427387904, 4)"))
    write(t, "zero_size_max_dimension", npy("<f8", (0,), [], shape_text="(9223372036854775807, 0)"))
    write(t, "rank_64", npy("<f4", (1,), [1.5], shape_text="(" + "1, " * 64 + ")"))
    write(t, "bad_rank_65", npy("<f4", (1,), [1.5], shape_text="(" + "1, " * 65 + ")"))


# ---- safetensors ----

ST_FORMATS = {"F32": "f", "F64": "d", "I64": "q", "BOOL": "B", "F16": "e", "BF16": "H"}


def safetensors(tensors, metadata=None, header_override=None):
    """tensors: (name, dtype, shape, values) in data order. The header is compact JSON padded to 8 bytes."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, values in tensors:
        raw = struct.pack("<" + ST_FORMATS[dtype] * len(values), *values)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = header_override if header_override is not None else json.dumps(header, separators=(",", ":"))
    encoded = text.encode("utf-8") if isinstance(text, str) else text
    encoded += b" " * ((8 - len(encoded) % 8) % 8)
    return struct.pack("<Q", len(encoded)) + encoded + data


def safetensors_corpus():
    t = "fuzz_safetensors"
    mixed = safetensors([("dense/kernel", "F32", (2, 3), [0.5, -1.0, 2.0, 0.0, 3.5, -2.25]),
                         ("dense/bias", "F64", (2,), [1e-3, -7.0]),
                         ("steps", "I64", (), [42]),
                         ("mask", "BOOL", (1, 3), [1, 0, 1])],
                        metadata={"format": "pt", "epoch": "3"})
    write(t, "mixed_with_metadata", mixed)
    write(t, "empty", safetensors([]))
    write(t, "metadata_only", safetensors([], metadata={"note": "no tensors"}))
    write(t, "f16_bf16", safetensors([("half", "F16", (3,), [1.0, -0.5, 65504.0]),
                                      ("brain", "BF16", (2,), [0x3f80, 0xc000])]))
    write(t, "f16_subnormal_inf_nan", safetensors([("h", "F16", (2, 2), [6e-8, float("inf"), float("nan"), -0.0])]))
    write(t, "zero_size_tensor", safetensors([("nothing", "F32", (0, 4), []), ("one", "F32", (1,), [1.0])]))
    write(t, "unicode_names", safetensors([], header_override='{"caf\\u00e9":{"dtype":"F32","shape":[],'
                                                              '"data_offsets":[0,4]},"\\ud83d\\ude00\\n":{"dtype":'
                                                              '"BOOL","shape":[1],"data_offsets":[4,5]}}')
          + b"\x00\x00\x80\x3f\x01")
    # Rejected.
    write(t, "bad_truncated_data", mixed[:-3])
    write(t, "bad_truncated_header", mixed[:30])
    write(t, "bad_short_length", b"\x10\x00\x00")
    write(t, "bad_huge_header_length", struct.pack("<Q", 2**63) + b"{}      ")
    write(t, "bad_overlap", safetensors([], header_override='{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                                                            '"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}')
          + b"\x00" * 8)
    write(t, "bad_gap", safetensors([], header_override='{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}')
          + b"\x00" * 8)
    write(t, "bad_duplicate_key", safetensors([], header_override='{"a":{"dtype":"F32","shape":[],"data_offsets":'
                                                                  '[0,4]},"a":{"dtype":"F32","shape":[],"data_offsets"'
                                                                  ':[0,4]}}') + b"\x00" * 4)
    write(t, "bad_unknown_field", safetensors([], header_override='{"a":{"dtype":"F32","shape":[],"data_offsets":'
                                                                  '[0,4],"extra":1}}') + b"\x00" * 4)
    # Sizes near 2^63 and ranks at the limit.
    write(t, "zero_size_2p30_2p30", safetensors([], header_override='{"z":{"dtype":"F32","shape":[0,1073741824,'
                                                                    '1073741824],"data_offsets":[0,0]}}'))
    write(t, "bad_zero_size_strides_overflow",
          safetensors([], header_override='{"z":{"dtype":"F32","shape":[0,4611686018427387904,4],'
                                          '"data_offsets":[0,0]}}'))
    write(t, "rank_64", safetensors([("r", "F32", (1,) * 64, [2.5])]))
    write(t, "bad_rank_65", safetensors([("r", "F32", (1,) * 65, [2.5])]))
    write(t, "bad_utf8", safetensors([], header_override=b'{"\xff":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}')
          + b"\x00" * 4)
    write(t, "bad_lone_surrogate", safetensors([], header_override='{"\\udc00":{"dtype":"F32","shape":[],'
                                                                   '"data_offsets":[0,4]}}') + b"\x00" * 4)
    write(t, "bad_dtype", safetensors([], header_override='{"a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}')
          + b"\x00" * 4)
    write(t, "bad_shape_overflow", safetensors([], header_override='{"a":{"dtype":"F64","shape":[4294967296,'
                                                                   '4294967296],"data_offsets":[0,8]}}') + b"\x00" * 8)
    write(t, "bad_leading_zero", safetensors([], header_override='{"a":{"dtype":"F32","shape":[01],"data_offsets":'
                                                                 '[0,4]}}') + b"\x00" * 4)


# ---- .keras archives ----

def keras_corpus():
    """Seeds for fuzz_keras_archive: byte 0 then a whole archive (the fixtures Keras wrote), or byte 1 then a
    config.json (each fixture's, and edits of it) that the target stores in an archive of its own."""
    import zipfile

    t = "fuzz_keras_archive"
    fixtures = os.path.join(HERE, "..", "fixtures", "keras_archives")
    for name in sorted(os.listdir(fixtures)):
        if not name.endswith(".keras"):
            continue
        with open(os.path.join(fixtures, name), "rb") as f:
            archive = f.read()
        stem = name[: -len(".keras")]
        write(t, f"archive_{stem}", b"\x00" + archive)
        with zipfile.ZipFile(os.path.join(fixtures, name)) as z:
            config = z.read("config.json")
        write(t, f"config_{stem}", b"\x01" + config)
        if stem == "mlp":
            write(t, "bad_truncated_archive", b"\x00" + archive[: len(archive) // 2])
            text = config.decode()
            write(t, "bad_unknown_class", b"\x01" + text.replace('"Dense"', '"Conv7D"', 1).encode())
            write(t, "bad_wrong_type", b"\x01" + text.replace('"units": 8', '"units": "8"', 1).encode())
    write(t, "bad_not_a_zip", b"\x00not a zip")
    write(t, "bad_deep_json", b"\x01" + b"[" * 2000 + b"]" * 2000)
    write(t, "bad_not_an_object", b"\x01[1, 2, 3]")


if __name__ == "__main__":
    npy_corpus()
    safetensors_corpus()
    keras_corpus()
