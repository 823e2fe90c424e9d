mod addon_discovery;
mod addons;
mod assets;
mod camera;
mod meshy;
mod montage;
mod registry;
mod tools;
