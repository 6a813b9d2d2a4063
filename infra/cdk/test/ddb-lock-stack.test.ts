// Checks the synthesized template's real properties: key schema, TTL, billing, PITR, least
// privilege, runtime and architecture, and the saga's Retry/Catch. Bundling is skipped, so these
// run offline without cargo-lambda.
import * as cdk from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { DdbLockStack, DdbLockStackProps } from '../lib/ddb-lock-stack';

// Written out, not imported from the stack: widening the stack's list must fail these tests.
const LOCK_ACTIONS = ['dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'];

function synth(props: DdbLockStackProps = {}): Template {
  const app = new cdk.App({ context: { 'aws:cdk:bundling-stacks': [] } });
  return Template.fromStack(new DdbLockStack(app, 'Test', props));
}

type Statement = { Action: string | string[]; Resource: unknown; Effect: string };

/** Every policy statement attached to the role of the function whose DDB_LOCK_ALLOW_FORCE_RELEASE is `forceRelease`. */
function statementsOf(template: Template, forceRelease: 'true' | 'false'): Statement[] {
  const functions = template.findResources('AWS::Lambda::Function', {
    Properties: { Environment: { Variables: { DDB_LOCK_ALLOW_FORCE_RELEASE: forceRelease } } },
  });
  // The function names its role by Fn::GetAtt [role, Arn]; a policy attaches to it by Ref.
  const roles = Object.values(functions).map((f) => f.Properties.Role['Fn::GetAtt'][0] as string);
  expect(roles).toHaveLength(1);
  const policies = Object.values(template.findResources('AWS::IAM::Policy')).filter((p) =>
    (p.Properties.Roles as { Ref: string }[]).some((r) => roles.includes(r.Ref)),
  );
  return policies.flatMap((p) => p.Properties.PolicyDocument.Statement as Statement[]);
}

function dynamodbActions(statements: Statement[]): string[] {
  return statements
    .flatMap((s) => (Array.isArray(s.Action) ? s.Action : [s.Action]))
    .filter((a) => a.startsWith('dynamodb:'))
    .sort();
}

describe('lock table', () => {
  const template = synth();

  test('has string keys PK and SK, on-demand billing, TTL on TTL and point-in-time recovery', () => {
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      KeySchema: [
        { AttributeName: 'PK', KeyType: 'HASH' },
        { AttributeName: 'SK', KeyType: 'RANGE' },
      ],
      AttributeDefinitions: Match.arrayWith([
        { AttributeName: 'PK', AttributeType: 'S' },
        { AttributeName: 'SK', AttributeType: 'S' },
      ]),
      BillingMode: 'PAY_PER_REQUEST',
      TimeToLiveSpecification: { AttributeName: 'TTL', Enabled: true },
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      DeletionProtectionEnabled: true,
    });
  });

  test('has the sparse namespace index list queries and the tasks index claims query', () => {
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      AttributeDefinitions: Match.arrayWith([{ AttributeName: 'Namespace', AttributeType: 'S' }]),
      GlobalSecondaryIndexes: [
        {
          IndexName: 'Namespace',
          KeySchema: [{ AttributeName: 'Namespace', KeyType: 'HASH' }],
          Projection: { ProjectionType: 'ALL' },
        },
        {
          IndexName: 'Tasks',
          KeySchema: [
            { AttributeName: 'TaskQueue', KeyType: 'HASH' },
            { AttributeName: 'ClaimableAt', KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'KEYS_ONLY' },
        },
      ],
    });
  });

  test('deletion protection is a setting', () => {
    synth({ deletionProtection: false }).hasResourceProperties('AWS::DynamoDB::Table', {
      DeletionProtectionEnabled: false,
    });
  });
});

describe('lock function', () => {
  const template = synth();

  test('runs the Rust bootstrap on provided.al2023, arm64, with its table configured', () => {
    template.resourceCountIs('AWS::Lambda::Function', 1);
    template.hasResourceProperties('AWS::Lambda::Function', {
      Runtime: 'provided.al2023',
      Architectures: ['arm64'],
      Environment: {
        Variables: {
          DDB_LOCK_TABLE: { Ref: Match.stringLikeRegexp('^LockTable') },
          DDB_LOCK_ALLOW_FORCE_RELEASE: 'false',
        },
      },
    });
  });

  test('may do exactly GetItem, PutItem, UpdateItem and DeleteItem on the lock table, and Query on its namespace index only', () => {
    const statements = statementsOf(template, 'false');
    expect(dynamodbActions(statements)).toEqual([...LOCK_ACTIONS, 'dynamodb:Query'].sort());
    for (const statement of statements.filter((s) => dynamodbActions([s]).length > 0)) {
      expect(JSON.stringify(statement.Resource)).toMatch(/LockTable/);
      if (dynamodbActions([statement]).includes('dynamodb:Query')) {
        expect(dynamodbActions([statement])).toEqual(['dynamodb:Query']);
        expect(JSON.stringify(statement.Resource)).toMatch(/\/index\/Namespace"/);
      } else {
        expect(statement.Resource).toEqual(expect.objectContaining({ 'Fn::GetAtt': expect.any(Array) }));
      }
    }
  });

  test('no statement anywhere grants a wildcard action or dynamodb on every resource', () => {
    for (const policy of Object.values(template.findResources('AWS::IAM::Policy'))) {
      for (const statement of policy.Properties.PolicyDocument.Statement as Statement[]) {
        const actions = Array.isArray(statement.Action) ? statement.Action : [statement.Action];
        expect(actions.filter((a) => a === '*' || a.endsWith(':*'))).toEqual([]);
        if (actions.some((a) => a.startsWith('dynamodb:'))) {
          expect(statement.Resource).not.toEqual('*');
        }
      }
    }
  });

  test('gets dynamodb:Scan only when scheduled cleanup is on, with its rule', () => {
    expect(dynamodbActions(statementsOf(template, 'false'))).not.toContain('dynamodb:Scan');
    const withCleanup = synth({ cleanupSchedule: events.Schedule.rate(cdk.Duration.hours(1)) });
    expect(dynamodbActions(statementsOf(withCleanup, 'false'))).toEqual(
      [...LOCK_ACTIONS, 'dynamodb:Query', 'dynamodb:Scan'].sort(),
    );
    withCleanup.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(1 hour)',
      Targets: [Match.objectLike({ Input: JSON.stringify({ op: 'cleanup' }) })],
    });
  });

  test('force release lives only in a separate function, off by default', () => {
    expect(
      Object.keys(
        template.findResources('AWS::Lambda::Function', {
          Properties: { Environment: { Variables: { DDB_LOCK_ALLOW_FORCE_RELEASE: 'true' } } },
        }),
      ),
    ).toHaveLength(0);
    const withAdmin = synth({ enableForceRelease: true });
    withAdmin.resourceCountIs('AWS::Lambda::Function', 2);
    expect(dynamodbActions(statementsOf(withAdmin, 'true'))).toEqual(['dynamodb:DeleteItem', 'dynamodb:GetItem']);
  });
});

describe('saga', () => {
  const template = synth();
  const machines = Object.values(template.findResources('AWS::StepFunctions::StateMachine'));
  const definition = JSON.parse(machines[0].Properties.DefinitionString);
  const states = definition.States;

  test('acquires with the execution as owner and retries contention with full jitter', () => {
    expect(definition.StartAt).toBe('AcquireLock');
    expect(states.AcquireLock.Parameters.Payload['owner.$']).toBe('$$.Execution.Id');
    const [contention, transient] = states.AcquireLock.Retry;
    expect(contention).toMatchObject({ ErrorEquals: ['LockHeld', 'LockTimeout'], JitterStrategy: 'FULL' });
    expect(contention.BackoffRate).toBeGreaterThan(1);
    expect(transient.ErrorEquals).toEqual(
      expect.arrayContaining(['Lambda.ServiceException', 'Lambda.AWSLambdaException', 'Lambda.SdkClientException']),
    );
  });

  test('catches a failure of the work, compensates by releasing with retries, then fails', () => {
    expect(states.ProtectedWork.Catch[0]).toMatchObject({ ErrorEquals: ['States.ALL'], Next: 'Compensate' });
    expect(states.ProtectedWork.Next).toBe('LeaseStillRunning');
    expect(states.Compensate.Parameters.Payload.op).toBe('release');
    // The lease end the acquire answered: a retried release that finds another execution's
    // lock taken by then was released, not lost.
    for (const release of [states.Compensate, states.ReleaseLock, states.ReleaseLapsedLock]) {
      expect(release.Parameters.Payload['expires_at.$']).toBe('$.lock.expires_at');
      expect(release.Parameters.Payload['retry_count.$']).toBe('$$.State.RetryCount');
    }
    expect(states.Compensate.Retry[0].MaxAttempts).toBeGreaterThanOrEqual(10);
    expect(states[states.Compensate.Next].Type).toBe('Fail');
  });

  test('a lease that ended before the work did fails the execution, after releasing', () => {
    const check = states.LeaseStillRunning;
    expect(check.Type).toBe('Choice');
    expect(check.Choices[0]).toMatchObject({
      Variable: '$.lock.expires_at',
      TimestampLessThanEqualsPath: '$$.State.EnteredTime',
      Next: 'ReleaseLapsedLock',
    });
    expect(check.Default).toBe('ReleaseLock');
    expect(states.AcquireLock.ResultSelector['expires_at.$']).toBe('$.Payload.expires_at');
    expect(states.ReleaseLapsedLock.Parameters.Payload.op).toBe('release');
    expect(states[states.ReleaseLapsedLock.Next]).toMatchObject({ Type: 'Fail', Error: 'LockLostDuringWork' });
  });

  test('may invoke the lock function', () => {
    template.hasResourceProperties('AWS::StepFunctions::StateMachine', {
      DefinitionSubstitutions: { LockFunctionArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^LockFunction'), 'Arn'] } },
    });
  });

  test('an ended execution (failed, timed out, aborted) has its lock released', () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: {
        source: ['aws.states'],
        'detail-type': ['Step Functions Execution Status Change'],
        detail: { status: ['FAILED', 'TIMED_OUT', 'ABORTED'] },
      },
      Targets: [
        Match.objectLike({
          InputTransformer: Match.objectLike({
            InputPathsMap: Match.objectLike({
              'detail-executionArn': '$.detail.executionArn',
              'detail-stopDate': '$.detail.stopDate',
            }),
            InputTemplate: Match.stringLikeRegexp('"op":"release_execution"'),
          }),
        }),
      ],
    });
  });
});

describe('table schema', () => {
  test('a pk/sk single-table design reaches the table and every function', () => {
    const template = synth({
      enableForceRelease: true,
      schema: { partitionKey: 'pk', sortKey: 'sk', sortKeyValue: 'MUTEX', keyPrefix: 'ORDER#', ttlAttribute: 'expires' },
    });
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      KeySchema: [
        { AttributeName: 'pk', KeyType: 'HASH' },
        { AttributeName: 'sk', KeyType: 'RANGE' },
      ],
      TimeToLiveSpecification: { AttributeName: 'expires', Enabled: true },
    });
    const variables = {
      DDB_LOCK_PARTITION_KEY: 'pk',
      DDB_LOCK_SORT_KEY: 'sk',
      DDB_LOCK_SORT_KEY_VALUE: 'MUTEX',
      DDB_LOCK_KEY_PREFIX: 'ORDER#',
      DDB_LOCK_TTL_ATTRIBUTE: 'expires',
      DDB_LOCK_DELETE_ON_RELEASE: 'true',
    };
    for (const forceRelease of ['true', 'false']) {
      template.hasResourceProperties('AWS::Lambda::Function', {
        Environment: { Variables: { ...variables, DDB_LOCK_ALLOW_FORCE_RELEASE: forceRelease } },
      });
    }
    expect(dynamodbActions(statementsOf(template, 'false'))).toEqual([...LOCK_ACTIONS, 'dynamodb:Query'].sort());
    expect(dynamodbActions(statementsOf(template, 'true'))).toEqual(['dynamodb:DeleteItem', 'dynamodb:GetItem']);
  });

  test('a table keyed by id alone, without TTL, keeping items', () => {
    const template = synth({
      enableForceRelease: true,
      deleteOnRelease: false,
      schema: { partitionKey: 'id', sortKey: null, keyPrefix: 'lock:', fenceKeyPrefix: 'fence:', ttlAttribute: null },
    });
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
      AttributeDefinitions: [
        { AttributeName: 'id', AttributeType: 'S' },
        { AttributeName: 'Namespace', AttributeType: 'S' },
        { AttributeName: 'TaskQueue', AttributeType: 'S' },
        { AttributeName: 'ClaimableAt', AttributeType: 'S' },
      ],
      TimeToLiveSpecification: Match.absent(),
    });
    template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: {
        Variables: {
          DDB_LOCK_PARTITION_KEY: 'id',
          DDB_LOCK_SORT_KEY: '',
          DDB_LOCK_TTL_ATTRIBUTE: '',
          DDB_LOCK_FENCE_KEY_PREFIX: 'fence:',
          DDB_LOCK_DELETE_ON_RELEASE: 'false',
        },
      },
    });
    expect(dynamodbActions(statementsOf(template, 'false'))).toEqual([...LOCK_ACTIONS, 'dynamodb:Query'].sort());
    expect(dynamodbActions(statementsOf(template, 'true'))).toEqual([
      'dynamodb:DeleteItem',
      'dynamodb:GetItem',
      'dynamodb:UpdateItem',
    ]);
  });

  test('an existing table is used, not created, and is the only resource granted', () => {
    const app = new cdk.App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const base = new cdk.Stack(app, 'Base');
    const existing = new dynamodb.Table(base, 'AppTable', {
      partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
      sortKey: { name: 'sk', type: dynamodb.AttributeType.STRING },
    });
    const stack = new DdbLockStack(app, 'Test', {
      existingTable: existing,
      schema: { partitionKey: 'pk', sortKey: 'sk' },
    });
    const template = Template.fromStack(stack);
    template.resourceCountIs('AWS::DynamoDB::Table', 0);
    const statements = statementsOf(template, 'false');
    expect(dynamodbActions(statements)).toEqual([...LOCK_ACTIONS, 'dynamodb:Query'].sort());
    for (const statement of statements) {
      expect(JSON.stringify(statement.Resource)).toContain('AppTable');
    }
  });
});
