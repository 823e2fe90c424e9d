//! The domains this application knows (the scene, slides, pages), as their kinds: what
//! reports read of their run folders and how resume builds each domain again on a contained
//! worker. A new domain is a crate of its own and one more line here.

use std::sync::Arc;

use viga_core::DomainKinds;

/// Every domain viga runs, for reports and resume.
pub fn kinds() -> DomainKinds {
    DomainKinds::new()
        .with(Arc::new(viga_domain_scene::SceneKind))
        .with(Arc::new(viga_domain_slides::SlidesKind))
        .with(Arc::new(viga_domain_page::PageKind))
}
