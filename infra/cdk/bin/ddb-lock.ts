#!/usr/bin/env node
// `npx cdk deploy`: the ddb-lock stack. Context: -c forceRelease=true, -c cleanupSchedule="rate(1 hour)".
import * as cdk from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import { DdbLockStack } from '../lib/ddb-lock-stack';

const app = new cdk.App();
const cleanup = app.node.tryGetContext('cleanupSchedule');
new DdbLockStack(app, 'DdbLock', {
  enableForceRelease: app.node.tryGetContext('forceRelease') === 'true',
  cleanupSchedule: cleanup ? events.Schedule.expression(cleanup) : undefined,
  deletionProtection: app.node.tryGetContext('deletionProtection') !== 'false',
});
