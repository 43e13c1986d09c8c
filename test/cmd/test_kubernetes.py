"""examples/kubernetes: the manifests are well-formed and set what they should, and the environment
the Pod spec gives each container works on the simulated driver.

No cluster exists here and the standard library has no YAML parser, so the manifests are written
as JSON, which is valid YAML (YAML 1.2 is a superset of JSON; kubectl and the API server read both)
and is parsed here strictly with json. The checks follow the Kubernetes API reference for the
fields used: a DaemonSet's selector must match its template's labels, every volumeMount must name
a volume of the pod, env entries are {name, value} with unique names.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import gatest
from gpuarena_cli.fmt import parse_size

K8S = os.path.join(gatest.REPO, "examples", "kubernetes")
NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")  # shim/group_host.c's rule for GPUARENA_GROUP
PROBE = os.path.join(gatest.BUILD, "test", "sizeprobe")
SIM_DIR = os.path.join(gatest.BUILD, "sim")
SHIM = os.path.join(gatest.BUILD, "lib", "libgpuarena.so")


def load(name):
    with open(os.path.join(K8S, name)) as f:
        return json.load(f)


def env_of(container):
    names = [e["name"] for e in container.get("env", [])]
    assert len(names) == len(set(names)), f"{container['name']}: an env name twice"
    return {e["name"]: e["value"] for e in container.get("env", [])}


def check_pod_spec(test, spec):
    """Every mount names a volume; returns {volume name: volume}."""
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for c in spec.get("initContainers", []) + spec["containers"]:
        test.assertTrue(c.get("image"), f"{c['name']}: no image")
        for m in c.get("volumeMounts", []):
            test.assertIn(m["name"], volumes, f"{c['name']} mounts an unknown volume")
    return volumes


class Manifests(unittest.TestCase):
    def test_daemonset_installs_the_library_on_gpu_nodes(self):
        ds = load("daemonset.yaml")
        self.assertEqual((ds["apiVersion"], ds["kind"]), ("apps/v1", "DaemonSet"))
        spec = ds["spec"]
        labels = spec["template"]["metadata"]["labels"]
        for k, v in spec["selector"]["matchLabels"].items():
            self.assertEqual(labels.get(k), v, "selector must match the template's labels")
        pod = spec["template"]["spec"]
        volumes = check_pod_spec(self, pod)
        self.assertIn("nvidia.com/gpu.present", pod["nodeSelector"])
        init = pod["initContainers"][0]
        mount = init["volumeMounts"][0]
        host = volumes[mount["name"]]["hostPath"]["path"]
        self.assertEqual(host, "/opt/gpuarena")
        script = " ".join(init["command"])
        self.assertIn(f"{mount['mountPath']}/libgpuarena.so", script)
        self.assertIn("mv -f", script, "the library replaces the old one atomically (rename)")

    def test_pod_preloads_with_a_group_and_cap_per_container(self):
        pod = load("pod.yaml")
        self.assertEqual((pod["apiVersion"], pod["kind"]), ("v1", "Pod"))
        volumes = check_pod_spec(self, pod["spec"])
        groups = []
        for c in pod["spec"]["containers"]:
            env = env_of(c)
            for k in ("LD_PRELOAD", "GPUARENA_GROUP", "GPUARENA_LIMIT"):
                self.assertIn(k, env, f"{c['name']} lacks {k}")
            self.assertRegex(env["GPUARENA_GROUP"], NAME_RE)
            groups.append(env["GPUARENA_GROUP"])
            self.assertGreater(parse_size(env["GPUARENA_LIMIT"]), 0)
            # The preloaded path lies in a mount of the hostPath the DaemonSet fills.
            lib = env["LD_PRELOAD"]
            self.assertTrue(os.path.isabs(lib))
            mounts = [m for m in c["volumeMounts"] if lib.startswith(m["mountPath"] + "/")]
            self.assertEqual(len(mounts), 1, f"{c['name']}: {lib} is in no mount")
            self.assertEqual(volumes[mounts[0]["name"]]["hostPath"]["path"],
                             os.path.dirname(lib.replace(mounts[0]["mountPath"], "/opt/gpuarena")))
        self.assertEqual(len(groups), len(set(groups)), "one group per container")

    def test_the_pod_environment_on_the_simulated_driver(self):
        """Each container's settings, with this build's shim in place of the node's copy: the
        program sees its cap as the device total."""
        for c in load("pod.yaml")["spec"]["containers"]:
            env = {k: v for k, v in env_of(c).items() if k != "LD_PRELOAD"}
            full = {k: v for k, v in os.environ.items() if not k.startswith("GPUARENA_")}
            full.update(env, LD_LIBRARY_PATH=SIM_DIR, SIMCUDA_TOTAL_MEM="80GiB",
                        LD_PRELOAD=" ".join(x for x in (gatest.SAN_RUNTIME, SHIM) if x))
            p = subprocess.run([PROBE, "shim"], env=full, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=60, check=False)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(int(p.stdout.split()[-1]), parse_size(env["GPUARENA_LIMIT"]),
                             f"{c['name']}: {p.stdout} {p.stderr}")

    def test_daemonset_install_runs_and_gives_the_command(self):
        """The init container's script, run here with its two folders moved into a temporary one
        (the image's /opt/gpuarena staged by `make install`, as the README's Dockerfile makes it,
        and the node's hostPath), twice (an upgrade): the node gets the library the pods preload
        and the `gpuarena` command that the README runs in a pod (`gpuarena top`). Until
        2026-12-07 it copied the library alone, so `gpuarena top`, which the README says to run
        in the container and in a metrics sidecar, was nowhere on the node (an outside check)."""
        init = load("daemonset.yaml")["spec"]["template"]["spec"]["initContainers"][0]
        self.assertEqual(init["command"][:2], ["/bin/sh", "-c"])
        with tempfile.TemporaryDirectory() as tmp:
            image, host = os.path.join(tmp, "image"), os.path.join(tmp, "host")
            os.makedirs(host)
            subprocess.run(["sh", os.path.join(gatest.REPO, "scripts", "install.sh"), "install",
                            gatest.BUILD, "/opt/gpuarena", image], cwd=gatest.REPO, check=True,
                           stdout=subprocess.DEVNULL, timeout=60)
            script = init["command"][2].replace("/opt/gpuarena", image + "/opt/gpuarena")
            script = script.replace("/host/gpuarena", host)
            for _ in range(2):
                p = subprocess.run(["/bin/sh", "-c", script], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, timeout=60, check=False)
                self.assertEqual(p.returncode, 0, p.stderr)
            with open(SHIM, "rb") as a, open(os.path.join(host, "libgpuarena.so"), "rb") as b:
                self.assertEqual(a.read(), b.read(), "the node's library is the image's")
            # The command as a pod reaches it (the hostPath mounted at /opt/gpuarena).
            cmd = os.path.join(host, "cmd", "bin", "gpuarena")
            self.assertTrue(os.access(cmd, os.X_OK), f"no command on the node: {sorted(os.listdir(host))}")
            empty = os.path.join(tmp, "shm")
            os.makedirs(empty)
            p = subprocess.run([cmd, "top", "--once", "--dir", empty], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=60, check=False)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("no gpuarena groups", p.stdout)
            left = sorted(os.listdir(host))
            self.assertEqual(left, ["cmd", "libgpuarena.so"], "nothing half-made left behind")
        with open(os.path.join(K8S, "README.md")) as f:
            self.assertIn("/opt/gpuarena/cmd/bin/gpuarena top", f.read())

    def test_loaded_through_etc_ld_so_preload(self):
        """Issue 11 item 4 for real: the shim named in /etc/ld.so.preload (as HAMi's device plugin
        mounts it), not LD_PRELOAD. In a private mount namespace /etc gets an overlay holding that
        file, so nothing outside the test sees it. A process that never touches CUDA prints
        nothing, whatever settings it has; a CUDA program under the plugin's variables is capped
        (the simulated device has 80 GiB)."""
        if os.geteuid() != 0 or not shutil.which("unshare") or gatest.SAN_RUNTIME:
            self.skipTest("needs root, unshare and a build without sanitizers to overlay /etc")
        if subprocess.run(["unshare", "-m", "true"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, timeout=30, check=False).returncode != 0:
            self.skipTest("no private mount namespace here (unshare -m refused)")
        with tempfile.TemporaryDirectory() as tmp:
            up, work, ledgers = (os.path.join(tmp, d) for d in ("up", "work", "shm"))
            for d in (up, work, ledgers):
                os.makedirs(d)
            with open(os.path.join(up, "ld.so.preload"), "w") as f:
                f.write(SHIM + "\n")
            script = (f"mount -t overlay overlay -o lowerdir=/etc,upperdir={up},workdir={work} /etc"
                      " 2>/dev/null || exit 77; exec \"$@\"")
            base = {k: v for k, v in os.environ.items()
                    if not k.startswith(("GPUARENA_", "CUDA_DEVICE_MEMORY_LIMIT")) and k != "LD_PRELOAD"}

            def run(argv, **env):
                return subprocess.run(["unshare", "-m", "sh", "-c", script, "sh"] + argv,
                                      env=dict(base, **env), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, timeout=60, check=False)

            p = run(["python3", "-c", "print('plain')"], GPUARENA_GROUP="bad/name",
                    CUDA_DEVICE_MEMORY_LIMIT="junk", GPUARENA_LIMT="1g")
            if p.returncode == 77:
                self.skipTest("no overlay mount here")
            self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "plain\n", ""))
            p = run([PROBE, "shim"], LD_LIBRARY_PATH=SIM_DIR, SIMCUDA_TOTAL_MEM="80GiB",
                    CUDA_DEVICE_MEMORY_LIMIT="8192m", GPUARENA_GROUP=f"k8s-{os.getpid()}",
                    GPUARENA_GROUP_DIR=ledgers)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(int(p.stdout.split()[-1]), 8 << 30, f"{p.stdout} {p.stderr}")

    def test_readme_names_the_files_and_variables(self):
        with open(os.path.join(K8S, "README.md")) as f:
            text = f.read()
        for word in ("daemonset.yaml", "pod.yaml", "CUDA_DEVICE_MEMORY_LIMIT",
                     "/etc/ld.so.preload", "GPUARENA_GROUP"):
            self.assertIn(word, text)


if __name__ == "__main__":
    unittest.main()
