"""The librdkafka mock cluster, driven through ctypes on the librdkafka inside confluent-kafka.

`test.mock.num.brokers` on a librdkafka handle starts a mock cluster owned by that handle;
the handle here is created directly with rd_kafka_new so that a process can host the mock
without also being a benchmark client. The mock has no CreateTopics, so topics with a
chosen partition count are made with rd_kafka_mock_topic_create.
"""

from __future__ import annotations

import ctypes
import glob
import os

import confluent_kafka

RD_KAFKA_PRODUCER = 0
_ERRSTR_SIZE = 512


def _load() -> ctypes.CDLL:
    package = os.path.dirname(confluent_kafka.__file__)
    libs = os.path.join(package, os.pardir, "confluent_kafka.libs")
    found = sorted(glob.glob(os.path.join(libs, "librdkafka*")))
    if not found:
        raise RuntimeError("librdkafka shared library not found next to confluent_kafka")
    lib = ctypes.CDLL(found[0])
    void_p, char_p = ctypes.c_void_p, ctypes.c_char_p
    lib.rd_kafka_conf_new.restype = void_p
    lib.rd_kafka_conf_new.argtypes = []
    lib.rd_kafka_conf_set.restype = ctypes.c_int
    lib.rd_kafka_conf_set.argtypes = [void_p, char_p, char_p, char_p, ctypes.c_size_t]
    lib.rd_kafka_new.restype = void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, void_p, char_p, ctypes.c_size_t]
    lib.rd_kafka_destroy.restype = None
    lib.rd_kafka_destroy.argtypes = [void_p]
    lib.rd_kafka_handle_mock_cluster.restype = void_p
    lib.rd_kafka_handle_mock_cluster.argtypes = [void_p]
    lib.rd_kafka_mock_cluster_bootstraps.restype = char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [void_p]
    lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
    lib.rd_kafka_mock_topic_create.argtypes = [void_p, char_p, ctypes.c_int, ctypes.c_int]
    return lib


class MockCluster:
    """A one-broker librdkafka mock cluster living in this process's C threads."""

    def __init__(self, brokers: int = 1) -> None:
        self._lib = _load()
        errstr = ctypes.create_string_buffer(_ERRSTR_SIZE)
        conf = self._lib.rd_kafka_conf_new()
        settings = {"test.mock.num.brokers": str(brokers), "log_level": "3"}
        for name, value in settings.items():
            if (
                self._lib.rd_kafka_conf_set(
                    conf, name.encode(), value.encode(), errstr, _ERRSTR_SIZE
                )
                != 0
            ):
                raise RuntimeError(f"rd_kafka_conf_set {name}: {errstr.value.decode()}")
        # rd_kafka_new takes ownership of conf, also on failure
        self._rk = self._lib.rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, _ERRSTR_SIZE)
        if not self._rk:
            raise RuntimeError(f"rd_kafka_new: {errstr.value.decode()}")
        self._cluster = self._lib.rd_kafka_handle_mock_cluster(self._rk)
        if not self._cluster:
            raise RuntimeError("the handle has no mock cluster")
        self.bootstrap_servers: str = self._lib.rd_kafka_mock_cluster_bootstraps(
            self._cluster
        ).decode()

    def create_topic(self, name: str, partitions: int) -> None:
        code = self._lib.rd_kafka_mock_topic_create(self._cluster, name.encode(), partitions, 1)
        if code != 0:
            raise RuntimeError(f"rd_kafka_mock_topic_create {name}: error {code}")

    def close(self) -> None:
        if self._rk:
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None
