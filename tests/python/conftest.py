"""Fixtures for the Python conformance suite: real `shoal server` processes on
loopback, and DataStax driver sessions connected to them. See shoal_harness.py
for the process control and the environment variables (SHOAL_BIN,
SHOAL_TEST_EXTERNAL)."""

import re
import warnings

import pytest

from shoal_harness import (
    ALL_NODES,
    EXTERNAL,
    VENV_BIN,
    ExternalNode,
    ShoalNode,
    connect_cluster,
    create_keyspace,
    unique_keyspace_name,
)


@pytest.fixture(scope="session", autouse=True)
def _stop_every_node_at_exit():
    yield
    for node in list(ALL_NODES):
        if isinstance(node, ShoalNode) and node.is_running():
            node.stop()


@pytest.fixture(scope="session")
def shoal_node(tmp_path_factory):
    """The shared node for all tests that do not need their own process."""
    if EXTERNAL:
        yield ExternalNode(EXTERNAL)
        return
    node = ShoalNode(tmp_path_factory.mktemp("shared-node"))
    node.start()
    yield node
    node.stop()


@pytest.fixture
def shoal_node_factory(tmp_path_factory, request):
    """make(config={...}, num_tokens=..., start=True) -> a fresh node with its
    own data dir; every node made is stopped at the end of the test."""
    if EXTERNAL:
        pytest.skip("needs its own shoal process; not available against an external server")
    made = []

    def make(config=None, start=True, **kwargs):
        name = re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)[:40]
        node = ShoalNode(tmp_path_factory.mktemp(f"node-{name}"), config=config, **kwargs)
        made.append(node)
        if start:
            node.start()
        return node

    yield make
    for node in made:
        if node.is_running():
            node.stop()


@pytest.fixture(scope="session")
def _connected(shoal_node):
    c = connect_cluster(shoal_node)
    try:
        s = c.connect()
        yield c, s
    finally:
        c.shutdown()


@pytest.fixture(scope="session")
def cluster(_connected):
    """The shared driver Cluster (connected: metadata and token map are loaded)."""
    return _connected[0]


@pytest.fixture(scope="session")
def session(_connected):
    """The shared driver Session, with no current keyspace."""
    return _connected[1]


@pytest.fixture
def keyspace(session, request):
    """A fresh SimpleStrategy RF=1 keyspace for this test, dropped afterwards."""
    name = unique_keyspace_name(request.node.name)
    create_keyspace(session, name)
    yield name
    try:
        session.execute(f"DROP KEYSPACE IF EXISTS {name}")
    except Exception as e:  # a failed drop must not hide the test's own result
        warnings.warn(f"DROP KEYSPACE {name} failed: {e!r}")


@pytest.fixture
def ks_session(cluster, keyspace):
    """A driver session whose current keyspace is this test's keyspace."""
    s = cluster.connect(keyspace)
    try:
        yield s
    finally:
        s.shutdown()


@pytest.fixture(scope="module")
def module_ks_session(cluster, session, request):
    """A keyspace shared by the tests of one module, and a session using it."""
    name = unique_keyspace_name(request.module.__name__.rpartition(".")[2])
    create_keyspace(session, name)
    s = cluster.connect(name)
    try:
        yield s
    finally:
        s.shutdown()
        try:
            session.execute(f"DROP KEYSPACE IF EXISTS {name}")
        except Exception as e:
            warnings.warn(f"DROP KEYSPACE {name} failed: {e!r}")


@pytest.fixture(scope="session")
def cqlsh_bin():
    path = VENV_BIN / "cqlsh"
    if not path.exists():
        pytest.fail(f"cqlsh not found next to the Python interpreter: {path}")
    return str(path)
