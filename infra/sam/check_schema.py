"""Checks that the template's schema parameters reach the lock table and the functions.

Resolves the template's conditions and intrinsic functions (Ref, If, Equals, Not, Sub of
parameters) for given parameter values, without AWS, and asserts for the default schema, a
`pk`/`sk` single-table design, a table keyed by `id` alone without TTL, and an existing table:
the table's key schema and TTL, every function's DDB_LOCK_* variables, and that the IAM actions
are the least-privilege ones (UpdateItem for force release only when items are kept, Query on
the namespace index only).

Run by scripts/check-infra.sh with the pinned cfn-lint's template reader.
"""

import sys

from cfnlint.decode import decode

TEMPLATE = "infra/sam/template.yaml"


def resolve(value, params, conditions):
    """The value of `value` with intrinsics resolved; None for AWS::NoValue."""
    if isinstance(value, list):
        resolved = [resolve(v, params, conditions) for v in value]
        return [v for v in resolved if v is not None]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (key, arg), = value.items()
        if key == "Ref":
            if arg == "AWS::NoValue":
                return None
            return params.get(arg, f"<{arg}>")
        if key == "Fn::If":
            name, then, otherwise = arg
            return resolve(then if conditions[name] else otherwise, params, conditions)
        if key == "Fn::Equals":
            left, right = (resolve(a, params, conditions) for a in arg)
            return left == right
        if key == "Fn::Not":
            return not resolve(arg[0], params, conditions)
        if key == "Condition":
            return conditions[arg]
        if key == "Fn::GetAtt":
            return f"<{'.'.join(arg) if isinstance(arg, list) else arg}>"
        if key == "Fn::Sub":
            text = arg if isinstance(arg, str) else arg[0]
            for name, val in params.items():
                text = text.replace("${" + name + "}", str(val))
            return text
    out = {}
    for k, v in value.items():
        r = resolve(v, params, conditions)
        if r is not None:
            out[k] = r
    return out


def deploy(template, overrides):
    """The resources as deployed with the parameter values `overrides`."""
    params = {k: str(p.get("Default", "")) for k, p in template["Parameters"].items()}
    params.update(overrides)
    conditions = {}
    for name, expr in template["Conditions"].items():
        conditions[name] = resolve(expr, params, conditions)
    env = template["Globals"]["Function"]["Environment"]["Variables"]
    resources = {}
    for name, resource in template["Resources"].items():
        if "Condition" in resource and not conditions[resource["Condition"]]:
            continue
        resolved = resolve(resource, params, conditions)
        if resolved["Type"] == "AWS::Serverless::Function":
            variables = dict(resolve(env, params, conditions))
            variables.update(resolved["Properties"].get("Environment", {}).get("Variables", {}))
            resolved["Properties"]["Environment"] = {"Variables": variables}
        resources[name] = resolved
    return resources


def actions(function):
    found = set()
    for policy in function["Properties"]["Policies"]:
        for statement in policy.get("Statement", []):
            found.update(statement["Action"])
    return found


def check(name, overrides, keys, ttl, expected_env, force_actions):
    template, matches = decode(TEMPLATE)
    assert not matches, matches
    resources = deploy(template, overrides)
    table = resources.get("LockTable")
    if keys is None:
        assert table is None, f"{name}: an existing table is not created"
    else:
        props = table["Properties"]
        found = [(k["AttributeName"], k["KeyType"]) for k in props["KeySchema"]]
        assert found == keys, f"{name}: key schema {found}"
        defined = {d["AttributeName"]: d["AttributeType"] for d in props["AttributeDefinitions"]}
        expected = {n: "S" for n, _ in keys} | {"Namespace": "S", "TaskQueue": "S", "ClaimableAt": "S"}
        assert defined == expected, f"{name}: attributes {defined}"
        indexes = props["GlobalSecondaryIndexes"]
        assert indexes == [{"IndexName": "Namespace",
                            "KeySchema": [{"AttributeName": "Namespace", "KeyType": "HASH"}],
                            "Projection": {"ProjectionType": "ALL"}},
                           {"IndexName": "Tasks",
                            "KeySchema": [{"AttributeName": "TaskQueue", "KeyType": "HASH"},
                                          {"AttributeName": "ClaimableAt", "KeyType": "RANGE"}],
                            "Projection": {"ProjectionType": "KEYS_ONLY"}}], f"{name}: indexes {indexes}"
        assert props.get("TimeToLiveSpecification") == ttl, f"{name}: TTL {props.get('TimeToLiveSpecification')}"
    for function in ("LockFunction", "ForceReleaseFunction"):
        variables = resources[function]["Properties"]["Environment"]["Variables"]
        for var, value in expected_env.items():
            assert variables.get(var) == value, f"{name}: {function} {var}={variables.get(var)!r}"
    lock_actions = actions(resources["LockFunction"])
    assert lock_actions == {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
                            "dynamodb:DeleteItem", "dynamodb:Query"}, f"{name}: {lock_actions}"
    assert actions(resources["ForceReleaseFunction"]) == force_actions, name
    for function in ("LockFunction", "ForceReleaseFunction"):
        for policy in resources[function]["Properties"]["Policies"]:
            for statement in policy.get("Statement", []):
                table_arn = statement["Resource"]
                if statement["Action"] == ["dynamodb:Query"]:
                    # list: the namespace index, not the table.
                    index = "/index/Namespace"
                    assert table_arn.endswith(index), f"{name}: {table_arn}"
                    table_arn = table_arn.removesuffix(index)
                    if keys is not None:
                        assert table_arn == "${LockTable.Arn}", f"{name}: {table_arn}"
                        continue
                if keys is None:
                    assert table_arn.endswith(":table/app-table"), f"{name}: {table_arn}"
                else:
                    assert table_arn == "<LockTable.Arn>", f"{name}: {table_arn}"
    print(f"ok: {name}")


BASE = {"EnableForceRelease": "true"}
FORCE = {"dynamodb:GetItem", "dynamodb:DeleteItem"}

check("default schema", BASE, [("PK", "HASH"), ("SK", "RANGE")],
      {"AttributeName": "TTL", "Enabled": True},
      {"DDB_LOCK_PARTITION_KEY": "PK", "DDB_LOCK_SORT_KEY": "SK", "DDB_LOCK_KEY_PREFIX": "LOCK#",
       "DDB_LOCK_TTL_ATTRIBUTE": "TTL", "DDB_LOCK_DELETE_ON_RELEASE": "true"}, FORCE)
check("pk/sk single table", {**BASE, "PartitionKey": "pk", "SortKey": "sk",
                             "SortKeyValue": "MUTEX", "KeyPrefix": "ORDER#",
                             "TtlAttribute": "expires"},
      [("pk", "HASH"), ("sk", "RANGE")], {"AttributeName": "expires", "Enabled": True},
      {"DDB_LOCK_PARTITION_KEY": "pk", "DDB_LOCK_SORT_KEY": "sk",
       "DDB_LOCK_SORT_KEY_VALUE": "MUTEX", "DDB_LOCK_KEY_PREFIX": "ORDER#",
       "DDB_LOCK_TTL_ATTRIBUTE": "expires"}, FORCE)
check("id alone, no TTL, kept items", {**BASE, "PartitionKey": "id", "SortKey": "",
                                       "KeyPrefix": "lock:", "FenceKeyPrefix": "fence:",
                                       "TtlAttribute": "", "DeleteOnRelease": "false"},
      [("id", "HASH")], None,
      {"DDB_LOCK_PARTITION_KEY": "id", "DDB_LOCK_SORT_KEY": "", "DDB_LOCK_TTL_ATTRIBUTE": "",
       "DDB_LOCK_FENCE_KEY_PREFIX": "fence:", "DDB_LOCK_DELETE_ON_RELEASE": "false"},
      FORCE | {"dynamodb:UpdateItem"})
check("existing table", {**BASE, "ExistingTableName": "app-table", "PartitionKey": "pk",
                         "SortKey": "sk"}, None, None,
      {"DDB_LOCK_TABLE": "app-table", "DDB_LOCK_PARTITION_KEY": "pk"}, FORCE)
sys.exit(0)
