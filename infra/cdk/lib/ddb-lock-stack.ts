// The ddb-lock stack: lock table, lock function, optional force-release function and scheduled
// cleanup, and the example saga whose locks are released when an execution fails, times out or
// is aborted. Mirrors infra/sam/template.yaml; the saga definition is the same ASL file.
import * as fs from 'fs';
import * as path from 'path';
import * as cdk from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { RustFunction } from 'cargo-lambda-cdk';
import { Construct } from 'constructs';

/** The repository root, where the Cargo workspace is. */
const REPO_ROOT = path.join(__dirname, '..', '..', '..');

/** The namespace index's name: the library's default (`TableSchema::namespace_index`). */
export const NAMESPACE_INDEX = 'Namespace';

/** The tasks index's name: the library's default (`DEFAULT_TASKS_INDEX`). */
export const TASKS_INDEX = 'Tasks';

/** Every DynamoDB action a lock function needs: one item at a time, on the lock table only. */
export const LOCK_ACTIONS = [
  'dynamodb:GetItem',
  'dynamodb:PutItem',
  'dynamodb:UpdateItem',
  'dynamodb:DeleteItem',
];

/**
 * How lock items sit in the table: key attribute names, key formats, TTL attribute. Every field
 * defaults to the library's default layout (`PK`/`SK`, `LOCK#<resource>`, `TTL`); the function
 * gets them as its `DDB_LOCK_*` variables.
 */
export interface LockTableSchema {
  /** The partition key attribute (string). Default `PK`. */
  readonly partitionKey?: string;
  /** The sort key attribute (string); `null` for a table keyed by its partition key alone. Default `SK`. */
  readonly sortKey?: string | null;
  /** Sort key value of lock items. Default `LOCK`. */
  readonly sortKeyValue?: string;
  /** Sort key value of fence items. Default `FENCE`. */
  readonly fenceSortKeyValue?: string;
  /** Partition key prefix of lock items. Default `LOCK#`. */
  readonly keyPrefix?: string;
  /** Partition key suffix of lock items. Default none. */
  readonly keySuffix?: string;
  /** Partition key prefix of fence items, in a table without a sort key. Default `FENCE#`. */
  readonly fenceKeyPrefix?: string;
  /** Partition key suffix of fence items, in a table without a sort key. Default none. */
  readonly fenceKeySuffix?: string;
  /** The TTL attribute; `null` for none. Default `TTL`. */
  readonly ttlAttribute?: string | null;
}

export interface DdbLockStackProps extends cdk.StackProps {
  /** The layout of lock items in the table. Default: the library's (`PK`/`SK`, `TTL`). */
  readonly schema?: LockTableSchema;
  /**
   * A table of yours to put lock items in (a single-table design), instead of creating one;
   * `schema` must describe it. Default: the stack creates the lock table.
   */
  readonly existingTable?: dynamodb.ITable;
  /**
   * `false` keeps lock items on release, cleared of their holder, with their data; force release
   * then needs dynamodb:UpdateItem, which the admin function gets only then. Default true.
   */
  readonly deleteOnRelease?: boolean;
  /** Protect the lock table from deletion. Default true. */
  readonly deletionProtection?: boolean;
  /** Deploy a second, separately permissioned function that accepts force_release. Default false. */
  readonly enableForceRelease?: boolean;
  /** Delete long-expired lock items on this schedule (grants dynamodb:Scan). Default: off. */
  readonly cleanupSchedule?: events.Schedule;
  /** Lease when an event gives no lease_ms. Default 30 s. */
  readonly defaultLease?: cdk.Duration;
  /** Wait of acquire when an event gives no wait_ms. Default 10 s. */
  readonly defaultWait?: cdk.Duration;
  /** The field of the saga's execution input that names the locked resource. Default invoiceId. */
  readonly sagaResourceField?: string;
}

export class DdbLockStack extends cdk.Stack {
  readonly table: dynamodb.ITable;
  /** The table and schema variables every function of the stack gets. */
  private readonly schemaEnvironment: Record<string, string>;
  readonly lockFunction: lambda.Function;
  readonly saga: sfn.StateMachine;

  constructor(scope: Construct, id: string, props: DdbLockStackProps = {}) {
    super(scope, id, props);

    const schema = props.schema ?? {};
    const partitionKey = schema.partitionKey ?? 'PK';
    const sortKey = schema.sortKey === undefined ? 'SK' : schema.sortKey;
    const ttlAttribute = schema.ttlAttribute === undefined ? 'TTL' : schema.ttlAttribute;
    const deleteOnRelease = props.deleteOnRelease ?? true;
    this.table =
      props.existingTable ??
      new dynamodb.Table(this, 'LockTable', {
        partitionKey: { name: partitionKey, type: dynamodb.AttributeType.STRING },
        sortKey: sortKey === null ? undefined : { name: sortKey, type: dynamodb.AttributeType.STRING },
        billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
        timeToLiveAttribute: ttlAttribute ?? undefined,
        pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
        deletionProtection: props.deletionProtection ?? true,
        encryption: dynamodb.TableEncryption.AWS_MANAGED,
        removalPolicy: cdk.RemovalPolicy.DESTROY,
      });
    if (!props.existingTable) {
      // The sparse index of namespaced lock items, which `list` queries (never a Scan).
      (this.table as dynamodb.Table).addGlobalSecondaryIndex({
        indexName: NAMESPACE_INDEX,
        partitionKey: { name: 'Namespace', type: dynamodb.AttributeType.STRING },
        projectionType: dynamodb.ProjectionType.ALL,
      });
      // The sparse index of claimable tasks, which task claims query (never a Scan).
      (this.table as dynamodb.Table).addGlobalSecondaryIndex({
        indexName: TASKS_INDEX,
        partitionKey: { name: 'TaskQueue', type: dynamodb.AttributeType.STRING },
        sortKey: { name: 'ClaimableAt', type: dynamodb.AttributeType.STRING },
        projectionType: dynamodb.ProjectionType.KEYS_ONLY,
      });
    }
    this.schemaEnvironment = {
      DDB_LOCK_TABLE: this.table.tableName,
      DDB_LOCK_PARTITION_KEY: partitionKey,
      DDB_LOCK_SORT_KEY: sortKey ?? '',
      DDB_LOCK_SORT_KEY_VALUE: schema.sortKeyValue ?? 'LOCK',
      DDB_LOCK_FENCE_SORT_KEY_VALUE: schema.fenceSortKeyValue ?? 'FENCE',
      DDB_LOCK_KEY_PREFIX: schema.keyPrefix ?? 'LOCK#',
      DDB_LOCK_KEY_SUFFIX: schema.keySuffix ?? '',
      DDB_LOCK_FENCE_KEY_PREFIX: schema.fenceKeyPrefix ?? 'FENCE#',
      DDB_LOCK_FENCE_KEY_SUFFIX: schema.fenceKeySuffix ?? '',
      DDB_LOCK_TTL_ATTRIBUTE: ttlAttribute ?? '',
      DDB_LOCK_DELETE_ON_RELEASE: String(deleteOnRelease),
    };

    this.lockFunction = this.rustFunction('LockFunction', {
      DDB_LOCK_DEFAULT_LEASE_MS: String((props.defaultLease ?? cdk.Duration.seconds(30)).toMilliseconds()),
      DDB_LOCK_DEFAULT_WAIT_MS: String((props.defaultWait ?? cdk.Duration.seconds(10)).toMilliseconds()),
      DDB_LOCK_ALLOW_FORCE_RELEASE: 'false',
    });
    this.grant(this.lockFunction, 'LockItems', LOCK_ACTIONS);
    // `list`: a Query of the namespace index, and of nothing else.
    this.lockFunction.addToRolePolicy(
      new iam.PolicyStatement({
        sid: 'ListNamespace',
        effect: iam.Effect.ALLOW,
        actions: ['dynamodb:Query'],
        resources: [`${this.table.tableArn}/index/${NAMESPACE_INDEX}`],
      }),
    );

    if (props.enableForceRelease) {
      const admin = this.rustFunction('ForceReleaseFunction', { DDB_LOCK_ALLOW_FORCE_RELEASE: 'true' });
      // A force release that keeps the item clears it with an UpdateItem.
      const forceActions = ['dynamodb:GetItem', 'dynamodb:DeleteItem'];
      this.grant(admin, 'ForceRelease', deleteOnRelease ? forceActions : [...forceActions, 'dynamodb:UpdateItem']);
    }

    if (props.cleanupSchedule) {
      this.grant(this.lockFunction, 'CleanupScan', ['dynamodb:Scan']);
      new events.Rule(this, 'CleanupRule', {
        description: 'Deletes lock items whose lease ended long ago.',
        schedule: props.cleanupSchedule,
        targets: [
          new targets.LambdaFunction(this.lockFunction, {
            event: events.RuleTargetInput.fromObject({ op: 'cleanup' }),
          }),
        ],
      });
    }

    this.saga = new sfn.StateMachine(this, 'SagaStateMachine', {
      stateMachineType: sfn.StateMachineType.STANDARD,
      // Inline, so that the definition is part of the template rather than a separate asset.
      definitionBody: sfn.DefinitionBody.fromString(
        fs.readFileSync(path.join(REPO_ROOT, 'infra', 'statemachine', 'saga.asl.json'), 'utf8'),
      ),
      definitionSubstitutions: { LockFunctionArn: this.lockFunction.functionArn },
    });
    this.lockFunction.grantInvoke(this.saga);

    new events.Rule(this, 'ReleaseOnExecutionEndRule', {
      description: 'Releases the lock of a saga execution that failed, timed out or was aborted.',
      eventPattern: {
        source: ['aws.states'],
        detailType: ['Step Functions Execution Status Change'],
        detail: {
          status: ['FAILED', 'TIMED_OUT', 'ABORTED'],
          stateMachineArn: [this.saga.stateMachineArn],
        },
      },
      targets: [
        new targets.LambdaFunction(this.lockFunction, {
          retryAttempts: 20,
          maxEventAge: cdk.Duration.hours(1),
          event: events.RuleTargetInput.fromObject({
            op: 'release_execution',
            owner: events.EventField.fromPath('$.detail.executionArn'),
            execution_input: events.EventField.fromPath('$.detail.input'),
            resource_field: props.sagaResourceField ?? 'invoiceId',
            stopped_at: events.EventField.fromPath('$.detail.stopDate'),
          }),
        }),
      ],
    });

    new cdk.CfnOutput(this, 'LockTableName', { value: this.table.tableName });
    new cdk.CfnOutput(this, 'LockFunctionArn', { value: this.lockFunction.functionArn });
    new cdk.CfnOutput(this, 'SagaStateMachineArn', { value: this.saga.stateMachineArn });
  }

  /** The lock function binary, built by cargo-lambda for arm64. */
  private rustFunction(id: string, environment: Record<string, string>): lambda.Function {
    return new RustFunction(this, id, {
      manifestPath: path.join(REPO_ROOT, 'lambda', 'Cargo.toml'),
      binaryName: 'bootstrap',
      runtime: 'provided.al2023',
      architecture: lambda.Architecture.ARM_64,
      memorySize: 256,
      timeout: cdk.Duration.seconds(30),
      loggingFormat: lambda.LoggingFormat.JSON,
      environment: { ...this.schemaEnvironment, ...environment },
    });
  }

  /** Grants `actions` on the lock table, and nothing else, to `fn`'s role. */
  private grant(fn: lambda.Function, sid: string, actions: string[]): void {
    fn.addToRolePolicy(
      new iam.PolicyStatement({ sid, effect: iam.Effect.ALLOW, actions, resources: [this.table.tableArn] }),
    );
  }
}
