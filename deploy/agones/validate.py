#!/usr/bin/env python3
"""Validates gatehouse's Agones manifests offline (docs/operations.md, "Under Agones").

Each document of each manifest is checked against the openAPIV3Schema of the Agones CRD of its
kind (crds.yaml beside this file, extracted unchanged from Agones' install manifest), as
`kubectl apply --validate=strict` would on a cluster: apiVersion and kind must name a served
version of a known CRD, and a field the schema does not list is an error (the API server would
silently drop it). The kinds that are no Agones CRD (GameServerAllocation, served by the Agones
controller; PodMonitor; cert-manager's Certificate) are checked against the part of their
schema written here (HAND_SCHEMAS), as strictly. Then what the schemas cannot know: the
Fleet's `players` List holds network.max_players values, its health period leaves room for
missed pings, the FleetAutoscaler scales that Fleet, the allocation selects that Fleet and its
List, the PodMonitor scrapes the Fleet's admin port, the admin endpoint has its token, and the
Certificate fills the Secret the Fleet mounts.

    deploy/agones/validate.py                   # every manifest of deploy/agones
    deploy/agones/validate.py FILE...           # those files
    deploy/agones/validate.py --self-test       # broken copies of the manifests are refused

Needs PyYAML and jsonschema (.ci/agones-manifests installs them). Exit 0 when valid, 1 if not.
"""

import copy
import re
import sys
import tomllib
from pathlib import Path

import jsonschema
import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
MANIFESTS = [
    HERE / "fleet.yaml",
    HERE / "fleetautoscaler.yaml",
    HERE / "allocation.yaml",
    HERE / "podmonitor.yaml",
    HERE / "certificate.yaml",
]
LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
# The fields these manifests may use of the kinds that are no Agones CRD, from the APIs'
# reference documentation; `strict` closes every object.
HAND_SCHEMAS = {
    ("allocation.agones.dev/v1", "GameServerAllocation"): {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": ["selectors"],
                "properties": {
                    "selectors": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "properties": {
                                "matchLabels": LABELS,
                                "gameServerState": {"enum": ["Ready", "Allocated"]},
                                "lists": {
                                    "type": "object",
                                    "additionalProperties": {
                                        "type": "object",
                                        "properties": {
                                            "containsValue": {"type": "string"},
                                            "minAvailableCapacity": {"type": "integer", "minimum": 0},
                                            "maxAvailableCapacity": {"type": "integer", "minimum": 0},
                                        },
                                    },
                                },
                            },
                        },
                    },
                    "scheduling": {"enum": ["Packed", "Distributed"]},
                    "metadata": {
                        "type": "object",
                        "properties": {"labels": LABELS, "annotations": LABELS},
                    },
                },
            }
        },
    },
    ("monitoring.coreos.com/v1", "PodMonitor"): {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": ["selector", "podMetricsEndpoints"],
                "properties": {
                    "selector": {"type": "object", "properties": {"matchLabels": LABELS}},
                    "podMetricsEndpoints": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["port"],
                            "properties": {
                                "port": {"type": "string"},
                                "path": {"type": "string"},
                                "interval": {"type": "string", "pattern": "^[0-9]+(ms|s|m)$"},
                            },
                        },
                    },
                },
            }
        },
    },
    ("cert-manager.io/v1", "Certificate"): {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": ["secretName", "issuerRef"],
                "properties": {
                    "secretName": {"type": "string"},
                    "dnsNames": {"type": "array", "items": {"type": "string"}},
                    "duration": {"type": "string"},
                    "renewBefore": {"type": "string"},
                    "privateKey": {
                        "type": "object",
                        "properties": {
                            "algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]},
                            "size": {"type": "integer"},
                        },
                    },
                    "issuerRef": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string"},
                            "kind": {"type": "string"},
                            "group": {"type": "string"},
                        },
                    },
                },
            }
        },
    },
}
# The config file the image runs with (deploy/Dockerfile: GATEHOUSE_CONFIG) and its defaults.
SERVER_CONFIG = REPO / "config" / "server.toml"
DEFAULT_MAX_PLAYERS = 256
DEFAULT_HEALTH_INTERVAL_MS = 2000


def load_crds(path):
    """{(apiVersion, kind): openAPIV3Schema} for every served version of every CRD."""
    schemas = {}
    with open(path, encoding="utf-8") as f:
        for doc in yaml.safe_load_all(f):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec["versions"]:
                if version.get("served"):
                    key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                    schemas[key] = strict(version["schema"]["openAPIV3Schema"])
    for key, schema in HAND_SCHEMAS.items():
        schemas[key] = strict(schema)
    return schemas


def strict(schema):
    """A copy of `schema` where an object that lists its properties refuses any other, unless
    Kubernetes keeps unknown fields there (x-kubernetes-preserve-unknown-fields), as strict
    field validation does. `apiVersion`, `kind` and `metadata` are every object's (the API
    server checks metadata against ObjectMeta), so they stay open."""
    schema = copy.deepcopy(schema)
    top = schema.setdefault("properties", {})
    top.setdefault("apiVersion", {"type": "string"})
    top.setdefault("kind", {"type": "string"})
    top.setdefault("metadata", {"type": "object"})

    def walk(node, path):
        if isinstance(node, dict):
            if (
                "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
                and path[-1:] != ["metadata"]
            ):
                node["additionalProperties"] = False
            for key, value in node.items():
                walk(value, path + [key])
        elif isinstance(node, list):
            for item in node:
                walk(item, path)

    walk(schema, [])
    return schema


def schema_errors(doc, schemas):
    """What is wrong with one manifest document, as lines."""
    key = (doc.get("apiVersion"), doc.get("kind"))
    if key not in schemas:
        known = ", ".join(f"{v} {k}" for v, k in sorted(schemas))
        return [f"apiVersion {key[0]!r} kind {key[1]!r} is no served Agones CRD nor known kind ({known})"]
    validator = jsonschema.Draft7Validator(schemas[key])
    errors = []
    for error in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in error.absolute_path) or "(top)"
        errors.append(f"{where}: {error.message}")
    return errors


def server_settings():
    """(max_players, health_interval_ms) of the config the image runs with."""
    with open(SERVER_CONFIG, "rb") as f:
        config = tomllib.load(f)
    max_players = config.get("network", {}).get("max_players", DEFAULT_MAX_PLAYERS)
    health = config.get("fleet", {}).get("health_interval_ms", DEFAULT_HEALTH_INTERVAL_MS)
    return max_players, health


def millis(text):
    """A duration as the server reads it from the environment: an integer of ms, or a number
    with a unit (ms, s, m, h); None if it is neither."""
    m = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|h)?\s*", str(text))
    if not m:
        return None
    scale = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}[m.group(2)]
    return int(m.group(1)) * scale


def fleet_settings(fleet, errors, name):
    """(max_players, health_interval_ms) the Fleet's server runs with: the config file's,
    overridden by the container's GATEHOUSE_NETWORK__MAX_PLAYERS and
    GATEHOUSE_FLEET__HEALTH_INTERVAL_MS."""
    max_players, health_ms = server_settings()
    env = env_of(server_container(fleet))
    players = (env.get("GATEHOUSE_NETWORK__MAX_PLAYERS") or {}).get("value")
    if players is not None:
        if str(players).strip().isdigit():
            max_players = int(players)
        else:
            errors.append(f"Fleet {name}: GATEHOUSE_NETWORK__MAX_PLAYERS {players!r} is no number")
    health = (env.get("GATEHOUSE_FLEET__HEALTH_INTERVAL_MS") or {}).get("value")
    if health is not None:
        if millis(health) is None:
            errors.append(f"Fleet {name}: GATEHOUSE_FLEET__HEALTH_INTERVAL_MS {health!r} is no duration")
        else:
            health_ms = millis(health)
    return max_players, health_ms


def secret_errors(name, fleet):
    """The Secret volumes the server reads must be readable by the image's user (uid 10001):
    world-readable, or group-readable with fsGroup 10001."""
    errors = []
    spec = pod(fleet).get("spec") or {}
    fs_group = (spec.get("securityContext") or {}).get("fsGroup")
    for volume in spec.get("volumes") or []:
        secret = volume.get("secret")
        if secret is None:
            continue
        mode = secret.get("defaultMode", 0o644)
        if mode & 0o004 or (mode & 0o040 and fs_group == 10001):
            continue
        errors.append(
            f"Fleet {name}: the Secret volume {volume.get('name')!r} (defaultMode {mode:o}) is not "
            "readable by the server's uid 10001: set securityContext.fsGroup 10001 and a "
            "group-readable defaultMode such as 0440"
        )
    return errors


def gatehouse_errors(docs):
    """The checks the schemas cannot make, across the manifests' documents."""
    errors = []
    fleets = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "Fleet"}
    for name, fleet in fleets.items():
        max_players, health_ms = fleet_settings(fleet, errors, name)
        errors += secret_errors(name, fleet)
        spec = fleet["spec"]["template"]["spec"]
        players = (spec.get("lists") or {}).get("players")
        if players is None:
            errors.append(f"Fleet {name}: spec.template.spec.lists has no `players` List")
        elif players.get("capacity") != max_players:
            errors.append(
                f"Fleet {name}: lists.players.capacity is {players.get('capacity')}, expected "
                f"network.max_players ({max_players}) of {SERVER_CONFIG.relative_to(REPO)} and "
                "the container's GATEHOUSE_NETWORK__MAX_PLAYERS"
            )
        health = spec.get("health") or {}
        if health.get("disabled"):
            errors.append(f"Fleet {name}: health checking is disabled")
        period_ms = health.get("periodSeconds", 5) * 1000
        if period_ms < 2 * health_ms:
            errors.append(
                f"Fleet {name}: health.periodSeconds ({period_ms // 1000} s) should be at least "
                f"twice fleet.health_interval_ms ({health_ms} ms), or one late ping fails a check"
            )
        ports = spec.get("ports") or []
        if not any(p.get("protocol") == "UDP" and p.get("containerPort") == 7777 for p in ports):
            errors.append(f"Fleet {name}: no UDP port 7777 (the QUIC endpoint)")
    for name, fleet in fleets.items():
        errors += admin_errors(name, fleet)
    for doc in docs:
        if doc.get("kind") == "FleetAutoscaler" and doc["spec"].get("fleetName") not in fleets:
            errors.append(
                f"FleetAutoscaler {doc['metadata'].get('name')}: fleetName "
                f"{doc['spec'].get('fleetName')!r} is not a Fleet of these manifests"
            )
        if doc.get("kind") == "GameServerAllocation":
            errors += allocation_errors(doc, fleets)
        if doc.get("kind") == "PodMonitor":
            errors += pod_monitor_errors(doc, fleets)
        if doc.get("kind") == "Certificate":
            errors += certificate_errors(doc, fleets)
    return errors


def pod(fleet):
    """The pod template of a Fleet's game servers."""
    return fleet["spec"]["template"]["spec"].get("template") or {}


def server_container(fleet):
    """The gatehouse-server container of a Fleet's pod (the first one)."""
    containers = (pod(fleet).get("spec") or {}).get("containers") or [{}]
    return containers[0]


def env_of(container):
    return {e.get("name"): e for e in container.get("env") or []}


def admin_errors(name, fleet):
    """The admin endpoint of a Fleet: bound on the port the container declares and the
    scrape annotation names, with its token from a Secret (beyond loopback it is required)."""
    container = server_container(fleet)
    env = env_of(container)
    bind = (env.get("GATEHOUSE_ADMIN__BIND") or env.get("GATEHOUSE_ADMIN_BIND") or {}).get("value")
    if bind is None:
        return []
    errors = []
    port = int(bind.rsplit(":", 1)[1])
    named = {p.get("name"): p for p in container.get("ports") or []}
    if (named.get("admin") or {}).get("containerPort") != port:
        errors.append(f"Fleet {name}: GATEHOUSE_ADMIN__BIND {bind} is not the container port `admin`")
    annotations = pod(fleet).get("metadata", {}).get("annotations") or {}
    if annotations.get("prometheus.io/port") not in (None, str(port)):
        errors.append(
            f"Fleet {name}: prometheus.io/port {annotations['prometheus.io/port']} is not the "
            f"admin port {port}"
        )
    token = env.get("GATEHOUSE_ADMIN__TOKEN") or env.get("GATEHOUSE_ADMIN_TOKEN") or {}
    if not bind.startswith("127.") and "secretKeyRef" not in token.get("valueFrom", {}):
        errors.append(
            f"Fleet {name}: the admin endpoint binds {bind} without GATEHOUSE_ADMIN__TOKEN from a "
            "Secret (the server refuses to start)"
        )
    return errors


def allocation_errors(doc, fleets):
    """Each selector of a GameServerAllocation names a Fleet of these manifests and Lists it
    declares."""
    errors = []
    for i, selector in enumerate(doc["spec"]["selectors"]):
        fleet = (selector.get("matchLabels") or {}).get("agones.dev/fleet")
        if fleet not in fleets:
            errors.append(
                f"GameServerAllocation: selectors[{i}].matchLabels agones.dev/fleet {fleet!r} "
                "is not a Fleet of these manifests"
            )
            continue
        declared = fleets[fleet]["spec"]["template"]["spec"].get("lists") or {}
        for name in selector.get("lists") or {}:
            if name not in declared:
                errors.append(
                    f"GameServerAllocation: selectors[{i}].lists.{name} is no List of Fleet {fleet}"
                )
    return errors


def pod_monitor_errors(doc, fleets):
    """A PodMonitor selects the pods of a Fleet and scrapes a port their container names."""
    selector = doc["spec"]["selector"].get("matchLabels") or {}
    name = doc["metadata"].get("name")
    for fleet in fleets.values():
        labels = pod(fleet).get("metadata", {}).get("labels") or {}
        if selector.items() <= labels.items():
            ports = {p.get("name") for p in server_container(fleet).get("ports") or []}
            return [
                f"PodMonitor {name}: port {e['port']!r} is no named port of the Fleet's container"
                for e in doc["spec"]["podMetricsEndpoints"]
                if e["port"] not in ports
            ]
    return [f"PodMonitor {name}: selector {selector} matches no Fleet's pods"]


def certificate_errors(doc, fleets):
    """A Certificate fills a Secret that a Fleet mounts."""
    secret = doc["spec"]["secretName"]
    for fleet in fleets.values():
        volumes = (pod(fleet).get("spec") or {}).get("volumes") or []
        if any((v.get("secret") or {}).get("secretName") == secret for v in volumes):
            return []
    return [f"Certificate {doc['metadata'].get('name')}: secretName {secret!r} is mounted by no Fleet"]


def validate(named_docs, schemas):
    """Every error of `named_docs` ([(label, document)]), as lines."""
    errors = []
    for label, doc in named_docs:
        errors += [f"{label}: {e}" for e in schema_errors(doc, schemas)]
    if not errors:
        errors += gatehouse_errors([doc for _, doc in named_docs])
    return errors


def load_manifests(paths):
    named = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for i, doc in enumerate(d for d in yaml.safe_load_all(f) if d):
                named.append((f"{Path(path).name}[{i}]", doc))
    return named


def self_test(schemas):
    """Each broken copy of the shipped manifests must be refused, naming what broke."""
    good = load_manifests(MANIFESTS)

    def broken(label, change, expect):
        docs = copy.deepcopy(good)
        change({d["kind"]: d for _, d in docs})
        errors = validate(docs, schemas)
        if not any(expect in e for e in errors):
            return [f"self-test {label}: expected an error naming {expect!r}, got {errors}"]
        print(f"refused as it should be: {label}: {next(e for e in errors if expect in e)}")
        return []

    failures = validate(good, schemas)
    failures += broken(
        "a misspelt field",
        lambda d: d["Fleet"]["spec"]["template"]["spec"].update(helth={"disabled": False}),
        "helth",
    )
    failures += broken(
        "a list beyond the CRD's capacity limit",
        lambda d: d["Fleet"]["spec"]["template"]["spec"]["lists"]["players"].update(capacity=5000),
        "capacity",
    )
    failures += broken(
        "a port protocol Agones does not know",
        lambda d: d["Fleet"]["spec"]["template"]["spec"]["ports"][0].update(protocol="QUIC"),
        "protocol",
    )
    failures += broken(
        "an autoscaler without its fleet",
        lambda d: d["FleetAutoscaler"]["spec"].pop("fleetName"),
        "fleetName",
    )
    failures += broken(
        "a wrong apiVersion",
        lambda d: d["FleetAutoscaler"].update(apiVersion="agones.dev/v1"),
        "no served Agones CRD",
    )
    failures += broken(
        "a players list smaller than max_players",
        lambda d: d["Fleet"]["spec"]["template"]["spec"]["lists"]["players"].update(capacity=8),
        "max_players",
    )
    failures += broken(
        "a health period shorter than two pings",
        lambda d: d["Fleet"]["spec"]["template"]["spec"]["health"].update(periodSeconds=1),
        "periodSeconds",
    )
    failures += broken(
        "an allocation of another fleet",
        lambda d: d["GameServerAllocation"]["spec"]["selectors"][0]["matchLabels"].update(
            {"agones.dev/fleet": "other"}
        ),
        "agones.dev/fleet",
    )
    failures += broken(
        "an allocation selecting a List the Fleet lacks",
        lambda d: d["GameServerAllocation"]["spec"]["selectors"][0].update(
            lists={"seats": {"minAvailableCapacity": 1}}
        ),
        "lists.seats",
    )
    failures += broken(
        "an allocation of a Shutdown server",
        lambda d: d["GameServerAllocation"]["spec"]["selectors"][1].update(gameServerState="Shutdown"),
        "gameServerState",
    )
    failures += broken(
        "a PodMonitor on a port the pod lacks",
        lambda d: d["PodMonitor"]["spec"]["podMetricsEndpoints"][0].update(port="metrics"),
        "port 'metrics'",
    )
    failures += broken(
        "a Certificate for a Secret nobody mounts",
        lambda d: d["Certificate"]["spec"].update(secretName="other-tls"),
        "other-tls",
    )
    failures += broken(
        "an admin endpoint beyond loopback without its token",
        lambda d: server_container(d["Fleet"])["env"].__setitem__(
            slice(None),
            [
                e
                for e in server_container(d["Fleet"])["env"]
                if e["name"] not in ("GATEHOUSE_ADMIN__TOKEN", "GATEHOUSE_ADMIN_TOKEN")
            ],
        ),
        "GATEHOUSE_ADMIN__TOKEN",
    )
    failures += broken(
        "more players than the List holds, from the container's environment",
        lambda d: server_container(d["Fleet"])["env"].append(
            {"name": "GATEHOUSE_NETWORK__MAX_PLAYERS", "value": "512"}
        ),
        "GATEHOUSE_NETWORK__MAX_PLAYERS",
    )
    failures += broken(
        "a health interval from the environment too long for the health period",
        lambda d: server_container(d["Fleet"])["env"].append(
            {"name": "GATEHOUSE_FLEET__HEALTH_INTERVAL_MS", "value": "10s"}
        ),
        "periodSeconds",
    )
    failures += broken(
        "a certificate Secret the server's user cannot read",
        lambda d: pod(d["Fleet"])["spec"]["securityContext"].pop("fsGroup"),
        "not readable by the server",
    )
    failures += broken(
        "a scrape annotation on another port",
        lambda d: pod(d["Fleet"])["metadata"]["annotations"].update({"prometheus.io/port": "9090"}),
        "prometheus.io/port",
    )
    return failures


def main(argv):
    schemas = load_crds(HERE / "crds.yaml")
    if argv[1:] == ["--self-test"]:
        failures = self_test(schemas)
        for line in failures:
            print(line, file=sys.stderr)
        print(f"agones manifests self-test: {'failed' if failures else 'passed'}")
        return 1 if failures else 0
    paths = [Path(p) for p in argv[1:]] or MANIFESTS
    errors = validate(load_manifests(paths), schemas)
    for line in errors:
        print(line, file=sys.stderr)
    names = ", ".join(p.name for p in paths)
    print(f"agones manifests: {names}: {'invalid' if errors else 'valid'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
