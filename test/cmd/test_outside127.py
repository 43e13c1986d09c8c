"""Findings of an outside check of issue 10 (pools and the vmm mode) from the command (helper-127).

- `gpuarena report --mode vmm --vmm-keep 0` draws another reserved curve than the default keep
  (on somas_tiny_bert it ends at 0 bytes instead of 64 MiB), and `--granularity` another again,
  but neither was said anywhere: the JSON's `otherData` and process names and the PNG's title
  named the mode alone, so two reports of one trace at two keeps could not be told apart, where
  `--limit` and `--fraction` are said (`otherData.setting`). Now said the same way.
"""

import json
import os
import shutil
import tempfile
import unittest

import gatest


class ReportSaysVmmSettings(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpuarena-test127-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def report(self, src, *args):
        out = os.path.join(self.dir, "rep")
        p = gatest.cli("report", src, "-o", out, *args)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out + ".json") as f:
            return json.load(f)

    def test_keep_and_granularity_said(self):
        src = os.path.join(gatest.TRACES, "lifetimes", "somas_tiny_bert.csv")
        cases = ((("--vmm-keep", "0"), "GPUARENA_VMM_KEEP=0 bytes", "0"),
                 (("--vmm-keep", "64MiB"), "GPUARENA_VMM_KEEP=67108864 bytes", "64MiB"),
                 (("--granularity", "64KiB"), "granules of 65536 bytes", None),
                 (("--vmm-keep", "0", "--granularity", "4MiB", "--limit", "1GiB"),
                  "cap 1073741824 bytes, GPUARENA_VMM_KEEP=0 bytes, granules of 4194304 bytes",
                  "0"))
        finals = {}
        for opts, setting, keep in cases:
            with self.subTest(opts=opts):
                doc = self.report(src, "--mode", "vmm", *opts)
                self.assertEqual(doc["otherData"].get("setting"), setting)
                names = [e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"]
                self.assertIn(f"reserved in vmm mode ({setting})", names[0])
                res = [e["args"]["reserved"] for e in doc["traceEvents"]
                       if e["ph"] == "C" and e["name"] == "reserved"]
                if keep:
                    finals[keep] = res[-1]
        # what the settings change: the keep decides what stays mapped at the end
        self.assertEqual(finals["0"], 0)
        self.assertEqual(finals["64MiB"], 64 << 20)
        # the default keep, and no setting, say nothing more than before
        doc = self.report(src, "--mode", "vmm")
        self.assertNotIn("setting", doc["otherData"])


if __name__ == "__main__":
    unittest.main()
