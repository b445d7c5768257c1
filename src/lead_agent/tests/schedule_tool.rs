//! `schedule_task` reaches the lead agent while `scheduler.enabled`, and a custom agent whose
//! tool groups name `schedule`; never a sub-agent.

use super::*;

fn has_schedule_task(lead: &LeadAgent) -> bool {
    tool_names(lead).iter().any(|name| name == SCHEDULE_TASK)
}

#[test]
fn the_lead_and_agents_whose_groups_allow_it_get_schedule_task() {
    let f = fixture(|_| {});
    f.create("root", "reader", |c| {
        c.tool_groups = Some(vec!["file:read".into()])
    });
    f.create("root", "planner", |c| {
        c.tool_groups = Some(vec!["file:read".into(), "schedule".into()])
    });
    let default = f.build("root", RunOptions::default()).unwrap();
    assert!(has_schedule_task(&default), "{:?}", tool_names(&default));
    let tool = default
        .agent
        .tools
        .iter()
        .find(|t| t.name() == SCHEDULE_TASK)
        .unwrap();
    assert_eq!(tool.group(), Some("schedule"));
    assert!(!has_schedule_task(
        &f.build("root", custom("reader")).unwrap()
    ));
    assert!(has_schedule_task(
        &f.build("root", custom("planner")).unwrap()
    ));
    // `schedule` is a group custom agents may name.
    let groups = crate::tools::registry::configured_groups(&f.config);
    assert!(groups.iter().any(|g| g == "schedule"), "{groups:?}");
    // Its metric label exists from the start, like the configured tools'.
    let names = crate::tools::registry::configured_tool_names(&f.config);
    assert!(names.iter().any(|n| n == SCHEDULE_TASK), "{names:?}");
}

#[test]
fn disabled_no_agent_gets_it_nor_may_name_its_group() {
    let f = fixture(|config| config.scheduler.enabled = false);
    let default = f.build("root", RunOptions::default()).unwrap();
    assert!(!has_schedule_task(&default), "{:?}", tool_names(&default));
    let groups = crate::tools::registry::configured_groups(&f.config);
    assert!(!groups.iter().any(|g| g == "schedule"), "{groups:?}");
    let names = crate::tools::registry::configured_tool_names(&f.config);
    assert!(!names.iter().any(|n| n == SCHEDULE_TASK), "{names:?}");
}
