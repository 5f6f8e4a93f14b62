"""Writers of tiny files in each public format, laid out exactly as the published files are.

Each writer returns the path and the arrays it wrote (in the publisher's own axis order), so tests
check the reader against the arrays by explicit index formulas rather than by the reader's code.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import scipy.io
import torch


def _rand(rng, *shape):
    return rng.standard_normal(shape)


class Writers:
    def __init__(self, root: Path):
        self.root = root
        self.rng = np.random.default_rng(1234)

    # ---------------------------------------------------------------- FNO .mat
    def mat(self, name: str, arrays: dict, version: str = "5") -> Path:
        """MATLAB v5 via scipy, or a v7.3-like HDF5 file: axes reversed, MATLAB_class attributes."""
        path = self.root / name
        if version == "5":
            scipy.io.savemat(path, arrays)
            return path
        header = version == "7.3-header"  # as MATLAB writes it: a 512-byte user block with a text header
        with h5py.File(path, "w", userblock_size=512 if header else 0) as f:
            for k, v in arrays.items():
                v = np.asarray(v, dtype=np.float64)
                ds = f.create_dataset(k, data=v.transpose(tuple(range(v.ndim - 1, -1, -1))))
                ds.attrs["MATLAB_class"] = np.bytes_("double")
        if header:
            text = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Jan  1 00:00:00 2024 HDF5 schema 1.00 ."
            with open(path, "r+b") as fh:
                fh.write(text.ljust(116, b" ") + b"\x00" * 8 + b"\x00\x02IM")
        return path

    def fno_darcy(self, version="5", n=3, s=21, name="piececonst_r21_N3_smooth1.mat"):
        coeff = np.where(_rand(self.rng, n, s, s) > 0, 12.0, 3.0)
        sol = _rand(self.rng, n, s, s)
        extra = {"Kcoeff": coeff[:, :-1, :-1]}
        return self.mat(name, {"coeff": coeff, "sol": sol, **extra}, version), coeff, sol

    def fno_ns(self, version="5", n=2, s=8, T=5, with_t=True, name="NavierStokes_V1e-5_N2_T5.mat"):
        a, u = _rand(self.rng, n, s, s), _rand(self.rng, n, s, s, T)
        t = np.arange(1, T + 1, dtype=np.float64)[None, :] * 1.0  # MATLAB stores a row vector (1, T)
        arrays = {"a": a, "u": u, **({"t": t} if with_t else {})}
        return self.mat(name, arrays, version), a, u, t.reshape(-1)

    def fno_burgers(self, version="5", n=4, s=32, name="burgers_data_R10.mat"):
        a, u = _rand(self.rng, n, s), _rand(self.rng, n, s)
        return self.mat(name, {"a": a, "u": u}, version), a, u

    # ---------------------------------------------------------------- PDEBench
    def pdebench_1d(self, n=3, T=6, X=16, name="1D_Burgers_Sols_Nu0.01.hdf5"):
        tensor = _rand(self.rng, n, T, X).astype(np.float32)
        x = (np.arange(X) + 0.5) / X * 2 - 1
        t = np.linspace(0, 2, T + 1)  # one value more than the snapshots, as PDEBench's 1D files
        path = self.root / name
        with h5py.File(path, "w") as f:
            f["tensor"] = tensor
            f["x-coordinate"] = x.astype(np.float32)
            f["t-coordinate"] = t.astype(np.float32)
        return path, tensor, x, t

    def pdebench_darcy(self, n=3, X=8, name="2D_DarcyFlow_beta1.0_Train.hdf5"):
        nu = self.rng.random((n, X, X)).astype(np.float32)
        tensor = _rand(self.rng, n, 1, X, X).astype(np.float32)
        path = self.root / name
        with h5py.File(path, "w") as f:
            f["nu"], f["tensor"] = nu, tensor
            f["x-coordinate"] = f["y-coordinate"] = np.linspace(0, 1, X).astype(np.float32)
        return path, nu, tensor

    def pdebench_cfd(self, n=2, T=4, X=6, Y=5, drop=None, name="2D_CFD_Rand_M0.1_Eta0.01_Zeta0.01_periodic_Train.hdf5"):
        arrays = {k: _rand(self.rng, n, T, X, Y).astype(np.float32) for k in ("density", "pressure", "Vx", "Vy")}
        path = self.root / name
        with h5py.File(path, "w") as f:
            for k, v in arrays.items():
                if k != drop:
                    f[k] = v
            f["x-coordinate"] = np.linspace(0, 1, X).astype(np.float32)
            f["y-coordinate"] = np.linspace(0, 1, Y).astype(np.float32)
            f["t-coordinate"] = np.linspace(0, 1, T + 1).astype(np.float32)
        return path, arrays

    def pdebench_seeds(self, n=3, T=5, X=6, Y=4, C=1, name="2D_rdb_NA_NA.h5", bad_group=None):
        data = {f"{i:04d}": _rand(self.rng, T, X, Y, C).astype(np.float32) for i in range(n)}
        path = self.root / name
        with h5py.File(path, "w") as f:
            for g in reversed(sorted(data)):  # written out of order: the reader sorts by name
                grp = f.create_group(g)
                arr = data[g] if g != bad_group else data[g][:, :-1]
                grp["data"] = arr
                grp["grid/x"] = np.linspace(-2.5, 2.5, X).astype(np.float32)
                grp["grid/y"] = np.linspace(-2.5, 2.5, Y).astype(np.float32)
                grp["grid/t"] = np.linspace(0, 1, T).astype(np.float32)
                grp.attrs["config"] = "sim: {}"
        return path, data

    # ---------------------------------------------------------------- neuraloperator .pt
    def pt(self, obj, name="darcy_train_16.pt") -> Path:
        path = self.root / name
        torch.save(obj, path)
        return path

    # ---------------------------------------------------------------- Geo-FNO
    def geofno_mesh(self, kind="airfoil", n=3, H=11, W=5, C=5, folder=None):
        names = {"airfoil": "NACA_Cylinder", "pipe": "Pipe"}[kind]
        d = self.root / (folder or kind)
        d.mkdir(parents=True, exist_ok=True)
        X, Y, Q = _rand(self.rng, n, H, W), _rand(self.rng, n, H, W), _rand(self.rng, n, C, H, W)
        for suffix, arr in (("X", X), ("Y", Y), ("Q", Q)):
            np.save(d / f"{names}_{suffix}.npy", arr)
        return d, X, Y, Q

    def geofno_elasticity(self, n=4, P=13, folder="elasticity"):
        d = self.root / folder / "Meshes"
        d.mkdir(parents=True, exist_ok=True)
        xy, sigma = self.rng.random((P, 2, n)), _rand(self.rng, P, n)
        np.save(d / "Random_UnitCell_XY_10.npy", xy)
        np.save(d / "Random_UnitCell_sigma_10.npy", sigma)
        return self.root / folder, xy, sigma

    def geofno_plasticity(self, n=3, X=11, Y=4, T=3, C=4, folder="plasticity", version="5"):
        d = self.root / folder
        d.mkdir(parents=True, exist_ok=True)
        inp, out = _rand(self.rng, n, X), _rand(self.rng, n, X, Y, T, C)
        old, self.root = self.root, d
        try:
            path = self.mat("plas_N3_T3.mat", {"input": inp, "output": out}, version)
        finally:
            self.root = old
        return d, path, inp, out

    # ---------------------------------------------------------------- The Well
    def the_well(self, B=2, T=3, nx=4, ny=5, name="shear_flow_Reynolds_1e4.hdf5", bad=None, no_dynamic=False):
        rng = self.rng
        arr = {
            "density": rng.standard_normal((B, T, nx, ny)).astype(np.float32),
            "pressure_x_only": rng.standard_normal((B, T, nx)).astype(np.float32),  # dim_varying [True, False]
            "velocity": rng.standard_normal((B, T, nx, ny, 2)).astype(np.float32),
            "stress": rng.standard_normal((B, T, nx, ny, 2, 2)).astype(np.float32),
            "mask": rng.standard_normal((nx, ny)).astype(np.float32),  # neither sample- nor time-varying
            "Re": np.array([1e4, 5e4]),
            "time": np.linspace(0, 1, T).astype(np.float32),
            "x": np.linspace(0, 1, nx, endpoint=False).astype(np.float32),
            "y": np.linspace(-1, 1, ny).astype(np.float32),
        }
        path = self.root / name
        with h5py.File(path, "w") as f:
            f.attrs.update(
                {
                    "dataset_name": "shear_flow",
                    "grid_type": "cartesian",
                    "n_spatial_dims": 2,
                    "n_trajectories": B,
                    "simulation_parameters": ["Schmidt"],
                    "Schmidt": 0.5,
                }
            )
            dims = f.create_group("dimensions")
            dims.attrs["spatial_dims"] = ["x", "y"]
            for k in ("time", "x", "y"):
                dims[k] = arr[k]
                dims[k].attrs["sample_varying"] = False
                dims[k].attrs["time_varying"] = False
            bc = f.create_group("boundary_conditions").create_group("x_periodic")
            bc.attrs.update(
                {"bc_type": "PERIODIC", "associated_dims": ["x"], "sample_varying": False, "time_varying": False}
            )
            sc = f.create_group("scalars")
            sc.attrs["field_names"] = ["Re", "gamma"]
            sc["Re"] = arr["Re"]
            sc["Re"].attrs.update({"sample_varying": True, "time_varying": False})
            sc["gamma"] = np.array([1.4])
            sc["gamma"].attrs.update({"sample_varying": False, "time_varying": False})

            def put(group, name, data, sv, tv, dv):
                group[name] = data
                group[name].attrs.update({"sample_varying": sv, "time_varying": tv, "dim_varying": dv})

            t0, t1, t2 = (f.create_group(f"t{i}_fields") for i in range(3))
            if no_dynamic:
                t0.attrs["field_names"] = ["mask"]
                put(t0, "mask", arr["mask"], False, False, [True, True])
                t1.attrs["field_names"] = t2.attrs["field_names"] = []
                return path, arr
            t0.attrs["field_names"] = ["density", "pressure_x_only", "mask"]
            put(
                t0,
                "density",
                arr["density"] if bad != "density" else arr["density"][:, :, :-1],
                True,
                True,
                [True, True],
            )
            put(t0, "pressure_x_only", arr["pressure_x_only"], True, True, [True, False])
            put(t0, "mask", arr["mask"], False, False, [True, True])
            t1.attrs["field_names"] = ["velocity"]
            put(t1, "velocity", arr["velocity"], True, True, [True, True])
            t2.attrs["field_names"] = ["stress"]
            put(t2, "stress", arr["stress"], True, True, [True, True])
            t2["stress"].attrs["symmetric"] = False
        return path, arr


@pytest.fixture
def make(tmp_path):
    return Writers(tmp_path)


def truncate(path: Path, keep: float = 0.5) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


@pytest.fixture
def cut():
    return truncate
